package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/initorigin/io-harness-go/internal/abi"
)

const modelsUsage = `Usage: io-harness models [--file PATH] [--vendor VENDOR] [--json]

Lists the model catalogue as a run sees it: for each model its vendor,
context window, largest output cap, list price per million tokens (input,
output, cache read, cache write, and the long-context price past a prompt
threshold), and whether it takes tool calls and images. A run prices its
turns, sizes its output caps and checks a money budget from it.

The catalogue is the one built in, with an override file merged in: --file
PATH, else IO_HARNESS_MODELS, as a spec's "models" does (docs/spec.md has
the format). "prices" is another name for this command.`

func (e *env) modelsCmd(args []string) int {
	fs := e.flags("models", modelsUsage)
	file := fs.String("file", "", "a catalogue override file (default: $IO_HARNESS_MODELS)")
	vendor := fs.String("vendor", "", "list only this vendor's models: anthropic, openai, openrouter, local, openai_compatible")
	asJSON := fs.Bool("json", false, "print the catalogue as JSON")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "models takes no arguments")
	}
	var res abi.ModelList
	if err := e.call("models.list", map[string]any{"file": *file, "use_environment": true}, &res); err != nil {
		return e.fail("models", err)
	}
	if *vendor != "" {
		kept := res.Models[:0]
		for _, m := range res.Models {
			if m.Vendor == *vendor {
				kept = append(kept, m)
			}
		}
		res.Models = kept
	}
	if *asJSON {
		e.printJSON(res)
		return exitOK
	}
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VENDOR\tMODEL\tCONTEXT\tMAX OUT\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tLONG CONTEXT\tTOOLS\tIMAGES")
	for _, m := range res.Models {
		in, out, read, write, long := "?", "?", "", "", ""
		if p := m.Price; p != nil {
			in, out, read, write = usd(p.Input), usd(p.Output), usdOr(p.CacheRead), usdOr(p.CacheWrite)
			if lc := p.LongContext; lc != nil {
				long = fmt.Sprintf(">%s: %s/%s", tokens(lc.AboveInputTokens), usd(lc.Input), usd(lc.Output))
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Vendor, m.ID, tokens(m.ContextWindow), tokens(m.MaxOutputTokens),
			in, out, read, write, long, yes(m.Tools), yes(m.Images))
	}
	w.Flush()
	fmt.Fprintf(e.stdout, "\n%d models. Prices in US dollars per million tokens; a cache price = is the input price; ? is unknown.\nCatalogue as of %s", len(res.Models), res.AsOf)
	if res.Override != "" {
		fmt.Fprintf(e.stdout, ", with %s", res.Override)
	}
	fmt.Fprintln(e.stdout, ".")
	return exitOK
}

// usd formats a price per million tokens.
func usd(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// usdOr formats a cache price; zero means the input price.
func usdOr(v float64) string {
	if v == 0 {
		return "="
	}
	return usd(v)
}

// tokens formats a token count, "?" when unknown.
func tokens(n int64) string {
	if n <= 0 {
		return "?"
	}
	return thousands(n)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
