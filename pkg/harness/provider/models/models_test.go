package models_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

func TestBuiltinIsComplete(t *testing.T) {
	c := models.Builtin()
	if c.Version != models.Version || c.AsOf == "" || len(c.Sources) == 0 {
		t.Fatalf("version %d, as_of %q, %d sources: the catalogue must say what it is and where its figures come from", c.Version, c.AsOf, len(c.Sources))
	}
	families := map[string]bool{}
	for _, m := range c.Models {
		if m.ContextWindow <= 0 {
			t.Errorf("%s %s: no context window", m.Vendor, m.ID)
		}
		// Every model a vendor bills by its own list must be priced: a
		// money budget refuses a run whose price is unknown.
		if (m.Vendor == models.VendorAnthropic || m.Vendor == models.VendorOpenAI || m.Vendor == models.VendorLocal) && m.Price == nil {
			t.Errorf("%s %s: no price", m.Vendor, m.ID)
		}
		if m.Vendor == models.VendorLocal && (m.Price == nil || m.Price.Input != 0 || m.Price.Output != 0) {
			t.Errorf("local %s: price %+v, want 0", m.ID, m.Price)
		}
		for _, f := range []string{"claude-opus", "claude-sonnet", "claude-haiku", "gpt-4.1", "gpt-4o", "o3", "o4-mini", "gpt-5",
			"deepseek/", "qwen/", "meta-llama/", "mistralai/", "google/gemini", "moonshotai/kimi", "gpt-oss", "llama3", "qwen2.5-coder"} {
			if strings.HasPrefix(m.ID, f) {
				families[f] = true
			}
		}
	}
	for _, f := range []string{"claude-opus", "claude-sonnet", "claude-haiku", "gpt-4.1", "gpt-4o", "o3", "o4-mini", "gpt-5",
		"deepseek/", "qwen/", "meta-llama/", "mistralai/", "google/gemini", "moonshotai/kimi", "gpt-oss", "llama3", "qwen2.5-coder"} {
		if !families[f] {
			t.Errorf("no %s model in the catalogue", f)
		}
	}
}

// TestBuiltinPrices checks the list prices against the costs vendors
// billed in recorded traffic (the upstream costs OpenRouter reported).
func TestBuiltinPrices(t *testing.T) {
	c := models.Builtin()
	tests := []struct {
		vendor, model string
		in, out       int64
		usd           float64
	}{
		{models.VendorOpenRouter, "openai/gpt-4o-mini", 67, 5, 0.00001005 + 0.000003},
		{models.VendorOpenRouter, "anthropic/claude-opus-4.7", 802, 66, 0.00401 + 0.00165},
		{models.VendorOpenRouter, "anthropic/claude-opus-4.7", 899, 19, 0.004495 + 0.000475},
		{models.VendorOpenRouter, "anthropic/claude-sonnet-4.6", 254, 5, 0.000762 + 0.000075},
		{models.VendorOpenAI, "gpt-4o-mini-2024-07-18", 67, 5, 0.00001005 + 0.000003},
		{models.VendorAnthropic, "claude-sonnet-4-6", 254, 5, 0.000762 + 0.000075},
	}
	for _, tt := range tests {
		m, ok := c.Lookup(tt.vendor, tt.model)
		if !ok || m.Price == nil {
			t.Errorf("%s %s: not priced", tt.vendor, tt.model)
			continue
		}
		got := m.Price.Cost(provider.Usage{InputTokens: tt.in, OutputTokens: tt.out})
		if d := got.USD - tt.usd; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s %s: %d in, %d out cost $%.9f, billed $%.9f", tt.vendor, tt.model, tt.in, tt.out, got.USD, tt.usd)
		}
	}
}

func TestLookup(t *testing.T) {
	c := models.Builtin()
	tests := []struct {
		vendor, model string
		id            string // "" means not found
		free          bool
	}{
		{models.VendorAnthropic, "claude-sonnet-4-5", "claude-sonnet-4-5", false},
		{models.VendorAnthropic, "claude-sonnet-4-5-20250929", "claude-sonnet-4-5", false},
		{models.VendorAnthropic, "claude-haiku-4-5-20251001", "claude-haiku-4-5", false},
		{models.VendorAnthropic, "claude-opus-4-0", "claude-opus-4", false},
		{models.VendorAnthropic, "claude-opus-4-20250514", "claude-opus-4", false},
		{models.VendorAnthropic, "Claude-Sonnet-4-5", "claude-sonnet-4-5", false},
		{models.VendorAnthropic, "gpt-4o", "", false}, // another vendor's model
		{models.VendorAnthropic, "claude-sonnet-4-5-2025", "", false},
		{models.VendorOpenAI, "gpt-4o-2024-08-06", "gpt-4o", false},
		{models.VendorOpenAI, "gpt-5.4", "gpt-5.4", false},
		{models.VendorOpenAI, "o9-unlisted", "", false},
		{models.VendorOpenRouter, "anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", false},
		{models.VendorOpenRouter, "openai/gpt-4.1", "gpt-4.1", false},
		{models.VendorOpenRouter, "openai/gpt-oss-120b", "openai/gpt-oss-120b", false}, // its own row, not OpenAI's
		{models.VendorOpenRouter, "qwen/qwen3-coder", "qwen/qwen3-coder", false},
		{models.VendorOpenRouter, "qwen/qwen3-coder:free", "qwen/qwen3-coder", true},
		{models.VendorOpenRouter, "qwen/qwen3-coder:nitro", "", false},
		{models.VendorOpenRouter, "gpt-4o", "", false},
		{models.VendorOpenRouter, "mistralai/unknown", "", false},
		{models.VendorLocal, "qwen2.5-coder:7b-instruct-q8_0", "qwen2.5-coder", false},
		{models.VendorLocal, "Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-coder", false},
		{models.VendorLocal, "gpt-oss:20b", "gpt-oss", false},
		{models.VendorLocal, "my-finetune:latest", "", false},
		{models.VendorCompatible, "llama3.3", "", false}, // a hosted gateway is not free
		{"", "gpt-4o", "", false},
		{models.VendorOpenAI, "", "", false},
	}
	for _, tt := range tests {
		m, ok := c.Lookup(tt.vendor, tt.model)
		if ok != (tt.id != "") || m.ID != tt.id {
			t.Errorf("Lookup(%q, %q) = %q, %v; want %q", tt.vendor, tt.model, m.ID, ok, tt.id)
			continue
		}
		if tt.free && (m.Price == nil || *m.Price != (provider.Price{})) {
			t.Errorf("Lookup(%q, %q): price %+v, want free", tt.vendor, tt.model, m.Price)
		}
	}
	// The free variant's zero price is a copy: the paid row keeps its price.
	if m, _ := c.Lookup(models.VendorOpenRouter, "qwen/qwen3-coder"); m.Price == nil || m.Price.Input == 0 {
		t.Errorf("the paid qwen3-coder lost its price: %+v", m.Price)
	}
}

func TestLookupReturnsACopy(t *testing.T) {
	c := models.Builtin()
	m, _ := c.Lookup(models.VendorOpenAI, "gpt-5.4")
	m.Price.Input = 999
	m.Price.LongContext.Input = 999
	m2, _ := c.Lookup(models.VendorOpenAI, "gpt-5.4")
	if m2.Price.Input == 999 || m2.Price.LongContext.Input == 999 {
		t.Error("changing a looked-up entry changed the catalogue")
	}
}

const override = `{
  "version": 1,
  "models": [
    {"vendor": "anthropic", "id": "claude-sonnet-4-5-20250929", "context_window": 100000, "max_output_tokens": 8000, "price": {"input": 1, "output": 2}, "tools": true},
    {"vendor": "openai_compatible", "id": "meta-llama/Llama-3.3-70B-Instruct-Turbo", "context_window": 131072, "price": {"input": 0.88, "output": 0.88}, "tools": true},
    {"vendor": "local", "id": "my-finetune"}
  ]
}`

func TestMerge(t *testing.T) {
	base := models.Builtin()
	o, err := models.Parse([]byte(override))
	if err != nil {
		t.Fatal(err)
	}
	merged := base.Merge(o)

	// The override names the dated snapshot; the built-in entry's id is
	// the undated one, which a lookup of either finds: both must see the
	// override, and the built-in entry must be gone, not shadowed.
	for _, id := range []string{"claude-sonnet-4-5", "claude-sonnet-4-5-20250929"} {
		m, ok := merged.Lookup(models.VendorAnthropic, id)
		if !ok || m.ContextWindow != 100000 || m.Price.Input != 1 {
			t.Errorf("merged Lookup(%q) = %+v, %v; want the override", id, m, ok)
		}
	}
	if m, ok := merged.Lookup(models.VendorCompatible, "meta-llama/Llama-3.3-70B-Instruct-Turbo"); !ok || m.Price.Input != 0.88 {
		t.Errorf("added entry: %+v, %v", m, ok)
	}
	if m, ok := merged.Lookup(models.VendorLocal, "my-finetune:q4"); !ok || m.Price != nil {
		t.Errorf("an entry without a price: %+v, %v; want found, price unknown", m, ok)
	}
	if m, ok := merged.Lookup(models.VendorOpenAI, "gpt-4o"); !ok || m.Price.Input != 2.5 {
		t.Errorf("untouched entry: %+v, %v", m, ok)
	}
	if len(merged.Models) != len(base.Models)+2 {
		t.Errorf("merged has %d models, want %d (one replaced, two added)", len(merged.Models), len(base.Models)+2)
	}
	// Neither input changed.
	if m, _ := base.Lookup(models.VendorAnthropic, "claude-sonnet-4-5"); m.ContextWindow != 200000 {
		t.Errorf("Merge changed its receiver: %+v", m)
	}
	if len(o.Models) != 3 {
		t.Errorf("Merge changed its argument")
	}
	if got := base.Merge(nil); !cmp.Equal(got, base) {
		t.Errorf("Merge(nil) differs from the catalogue: %s", cmp.Diff(base, got))
	}
}

func TestParseErrors(t *testing.T) {
	model := func(fields string) string {
		return `{"version": 1, "models": [{"vendor": "openai", "id": "m", "tools": true` + fields + `}]}`
	}
	tests := []struct {
		name, doc, field, msg string
	}{
		{"unknown top-level field", `{"version": 1, "modles": []}`, "modles", "unknown field"},
		{"no version", `{"models": []}`, "version", "required"},
		{"other version", `{"version": 2, "models": []}`, "version", "version 2"},
		{"bad date", `{"version": 1, "as_of": "July 2026", "models": []}`, "as_of", "not a date"},
		{"unknown model field", model(`, "contxt_window": 5`), "models[0].contxt_window", "unknown field"},
		{"unknown price field", model(`, "price": {"input": 1, "output": 2, "cach_read": 1}`), "models[0].price.cach_read", "unknown field"},
		{"unknown long-context field", model(`, "price": {"input": 1, "output": 2, "long_context": {"above_input_tokens": 5, "input": 1, "output": 1, "x": 1}}`), "models[0].price.long_context.x", "unknown field"},
		{"mistyped field", model(`, "context_window": "big"`), "models[0].context_window", "want int64"},
		{"mistyped price", model(`, "price": {"input": "1", "output": 2}`), "models[0].price.input", "want float64"},
		{"no vendor", `{"version": 1, "models": [{"id": "m"}]}`, "models[0].vendor", "required"},
		{"unknown vendor", `{"version": 1, "models": [{"vendor": "gemini", "id": "m"}]}`, "models[0].vendor", `unknown vendor "gemini"`},
		{"no id", `{"version": 1, "models": [{"vendor": "openai"}]}`, "models[0].id", "required"},
		{"spaced id", `{"version": 1, "models": [{"vendor": "openai", "id": " m"}]}`, "models[0].id", "surrounding space"},
		{"negative window", model(`, "context_window": -1`), "models[0].context_window", "negative"},
		{"output over window", model(`, "context_window": 10, "max_output_tokens": 11`), "models[0].max_output_tokens", "more than the context window"},
		{"no input price", model(`, "price": {"output": 2}`), "models[0].price.input", "required"},
		{"no output price", model(`, "price": {"input": 2}`), "models[0].price.output", "required"},
		{"negative price", model(`, "price": {"input": 1, "output": 2, "cache_write": -1}`), "models[0].price.cache_write", "negative"},
		{"no threshold", model(`, "price": {"input": 1, "output": 2, "long_context": {"input": 2, "output": 4}}`), "models[0].price.long_context.above_input_tokens", "required"},
		{"duplicate id", `{"version": 1, "models": [{"vendor": "openai", "id": "m"}, {"vendor": "openai", "id": "M"}]}`, "models[1].id", "already named at models[0].id"},
		{"alias of another", `{"version": 1, "models": [{"vendor": "openai", "id": "m"}, {"vendor": "openai", "id": "n", "aliases": ["m"]}]}`, "models[1].aliases[0]", "already named"},
		{"trailing data", `{"version": 1, "models": []} {}`, "", "trailing data"},
		{"not JSON", `{"version": 1,`, "", "truncated"},
		{"syntax", `{"version": 1 "models": []}`, "", "invalid JSON"},
	}
	for _, tt := range tests {
		_, err := models.Parse([]byte(tt.doc))
		var e *models.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err = %v, want *models.Error", tt.name, err)
			continue
		}
		if e.Field != tt.field || !strings.Contains(e.Error(), tt.msg) {
			t.Errorf("%s: field %q, error %q; want field %q and %q", tt.name, e.Field, e.Error(), tt.field, tt.msg)
		}
	}
	// The same id under two vendors is two models.
	if _, err := models.Parse([]byte(`{"version": 1, "models": [{"vendor": "openai", "id": "m"}, {"vendor": "local", "id": "m"}]}`)); err != nil {
		t.Errorf("one id, two vendors: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(override), 0o600)
	c, err := models.Load(good)
	if err != nil || c.File != good || len(c.Models) != 3 {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if m := models.Builtin().Merge(c); m.File != good {
		t.Errorf("a merged catalogue's File is %q, want the override's", m.File)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "models": [{"vendor": "openai", "id": "m", "price": {"input": 1, "ouput": 2}}]}`), 0o600)
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"version": 1, "models": [], "sources": ["`+strings.Repeat("x", models.MaxFileSize)+`"]}`), 0o600)
	tests := []struct {
		path, field, msg string
	}{
		{bad, "models[0].price.ouput", "unknown field"},
		{filepath.Join(dir, "missing.json"), "", "cannot be read"},
		{big, "", "larger than"},
		{dir, "", "not a regular file"},
		{"/dev/zero", "", "not a regular file"},
	}
	for _, tt := range tests {
		_, err := models.Load(tt.path)
		var e *models.Error
		if !errors.As(err, &e) || e.File != tt.path || e.Field != tt.field || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("Load(%s) = %v; want a *models.Error naming the file, field %q and %q", tt.path, err, tt.field, tt.msg)
		}
	}
}

// FuzzParse checks that any document is either refused with an *Error or
// read into a catalogue that survives a round trip through JSON, and that
// lookups in it never panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(override))
	f.Add([]byte(`{"version": 1, "models": [{"vendor": "openrouter", "id": "a/b:free", "price": {"input": 1, "output": 2, "long_context": {"above_input_tokens": 1, "input": 2, "output": 3}}}]}`))
	f.Add([]byte(`{"version": 1, "models": [{"vendor": "local", "id": "x", "aliases": ["y", "z"]}]}`))
	f.Add([]byte(`{"version": 1, "models": [null]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := models.Parse(data)
		if err != nil {
			var e *models.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *models.Error", err)
			}
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := models.Parse(out)
		if err != nil {
			t.Fatalf("a parsed catalogue does not parse again: %v\n%s", err, out)
		}
		if d := cmp.Diff(c, again, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip changed the catalogue:\n%s", d)
		}
		for _, m := range c.Models {
			for _, v := range models.Vendors() {
				c.Lookup(v, m.ID)
				c.Lookup(v, m.ID+":free")
				c.Lookup(v, "anthropic/"+m.ID)
			}
		}
	})
}
