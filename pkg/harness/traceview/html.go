package traceview

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed assets/page.html assets/view.css assets/view.js assets/index.html assets/index.js
var assets embed.FS

// page is the template of a trace page, parsed once per process on first
// use (see pageTemplate).
var pageFuncs = template.FuncMap{
	"thousands": func(n any) string {
		switch v := n.(type) {
		case int:
			return thousands(int64(v))
		case int64:
			return thousands(v)
		}
		return fmt.Sprint(n)
	},
	"money": func(m Money) string { return m.String() },
}

// String formats an amount as the text trace does.
func (m Money) String() string {
	switch {
	case !m.Known && m.USD == 0:
		return "unknown"
	case !m.Known:
		return "≥$" + strconv.FormatFloat(m.USD, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(m.USD, 'f', 4, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// pageData is what the template fills in.
type pageData struct {
	Title        string
	CSP          string
	Style        template.CSS
	Script       template.JS
	Data         template.JS
	Live         bool
	View         *View
	Root         *Agent
	Outcome      string
	OutcomeClass string
	Duration     string
	Tree         struct {
		Steps  int
		Tokens int64
		Cost   Money
	}
	Counts Counts
	Charts []chart
}

// chart is a cumulative series drawn as an SVG path.
type chart struct {
	Title, Max, From, To string
	W, H                 int
	Line, Area           string
}

// renderer holds the parsed template and the assets with their hashes.
type renderer struct {
	tmpl       *template.Template
	style      string
	script     string
	styleHash  string
	scriptHash string
}

func newRenderer() (*renderer, error) {
	page, err := assets.ReadFile("assets/page.html")
	if err != nil {
		return nil, err
	}
	style, err := assets.ReadFile("assets/view.css")
	if err != nil {
		return nil, err
	}
	script, err := assets.ReadFile("assets/view.js")
	if err != nil {
		return nil, err
	}
	t, err := template.New("page").Funcs(pageFuncs).Parse(string(page))
	if err != nil {
		return nil, err
	}
	return &renderer{tmpl: t, style: string(style), script: string(script), styleHash: cspHash(style), scriptHash: cspHash(script)}, nil
}

// csp is a page's content security policy: its own script and styles,
// and no request but, for a live page, to the server that served it.
func (r *renderer) csp(live bool) string {
	connect := "'none'"
	if live {
		connect = "'self'"
	}
	return "default-src 'none'; script-src " + r.scriptHash + "; style-src " + r.styleHash +
		"; img-src data:; connect-src " + connect + "; base-uri 'none'; form-action 'none'"
}

func cspHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// WriteHTML writes v as one self-contained HTML page: no request leaves it
// (its content security policy allows none), and everything in it that
// came from the run is text, never markup.
func WriteHTML(w io.Writer, v *View) error {
	r, err := newRenderer()
	if err != nil {
		return err
	}
	return r.write(w, v)
}

func (r *renderer) write(w io.Writer, v *View) error {
	if len(v.Agents) == 0 {
		return fmt.Errorf("traceview: the view holds no run")
	}
	data, err := json.Marshal(v) // escapes <, > and &: nothing ends the script element
	if err != nil {
		return err
	}
	root := v.Agents[0]
	d := &pageData{
		Title: "io-harness · " + root.Path + " · " + root.ID,
		CSP:   r.csp(v.Live),
		Style: template.CSS(r.style), Script: template.JS(r.script), Data: template.JS(data),
		Live: v.Live, View: v, Root: root,
	}
	d.Outcome = root.Outcome
	if d.Outcome == "" {
		d.Outcome = root.Status
	}
	switch {
	case root.Status == "running":
		d.OutcomeClass = "run"
	case d.Outcome == "success" || d.Outcome == "finished":
		d.OutcomeClass = "good"
	case d.Outcome == "awaiting_approval":
		d.OutcomeClass = "wait"
	default:
		d.OutcomeClass = "bad"
	}
	end := root.Finished
	if n := len(root.StepList); n > 0 {
		end = max(end, root.StepList[n-1].End)
	}
	if end > root.Started {
		d.Duration = (time.Duration(end-root.Started) * time.Millisecond).Round(time.Millisecond).String()
	} else {
		d.Duration = "–"
	}
	d.Tree.Cost.Known = true
	for _, a := range v.Agents {
		d.Tree.Steps += a.Steps
		d.Tree.Tokens += a.Usage.In + a.Usage.Out
		d.Tree.Cost.USD += a.Cost.USD
		d.Tree.Cost.Known = d.Tree.Cost.Known && a.Cost.Known
		c := a.Counts
		d.Counts.Refusals += c.Refusals
		d.Counts.Errors += c.Errors
		d.Counts.Retries += c.Retries
		d.Counts.Fallbacks += c.Fallbacks
		d.Counts.Approvals += c.Approvals
		d.Counts.Writes += c.Writes
		d.Counts.Denials += c.Denials
	}
	d.Charts = charts(v)
	var b bytes.Buffer
	if err := r.tmpl.Execute(&b, d); err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}

// charts draws the tree's tokens and cost over time, cumulative, each
// step counted when it ended.
func charts(v *View) []chart {
	type point struct {
		at     int64
		tokens int64
		usd    float64
	}
	var pts []point
	from := int64(-1)
	for _, a := range v.Agents {
		if from < 0 || a.Started < from {
			from = a.Started
		}
		for _, s := range a.StepList {
			pts = append(pts, point{s.End, s.Usage.In + s.Usage.Out, s.Cost.USD})
		}
	}
	slices.SortFunc(pts, func(a, b point) int { return int(a.at - b.at) })
	to := from + 1
	if n := len(pts); n > 0 {
		to = max(to, pts[n-1].at)
	}
	const w, h, most = 1000, 56, 400
	cum := make([]point, len(pts))
	var tok int64
	var usd float64
	for i, p := range pts {
		tok += p.tokens
		usd += p.usd
		cum[i] = point{p.at, tok, usd}
	}
	if len(cum) > most {
		// Keep the last point, and an even sample of the rest.
		step := float64(len(cum)) / most
		var kept []point
		for f := 0.0; int(f) < len(cum)-1; f += step {
			kept = append(kept, cum[int(f)])
		}
		cum = append(kept, cum[len(cum)-1])
	}
	path := func(val func(point) float64, top float64) (line, area string) {
		if top <= 0 || len(cum) == 0 {
			return fmt.Sprintf("M0 %d H%d", h, w), ""
		}
		var l strings.Builder
		x := func(at int64) float64 { return float64(at-from) / float64(to-from) * w }
		y := func(p point) float64 { return h - val(p)/top*(h-2) }
		fmt.Fprintf(&l, "M0 %d", h)
		for _, p := range cum {
			fmt.Fprintf(&l, " H%.1f V%.1f", x(p.at), y(p))
		}
		fmt.Fprintf(&l, " H%d", w)
		line = l.String()
		return line, line + fmt.Sprintf(" V%d H0 Z", h)
	}
	stamp := time.UnixMilli(from).UTC().Format("2006-01-02 15:04:05 UTC")
	span := "+" + (time.Duration(to-from) * time.Millisecond).Round(time.Millisecond).String()
	tl, ta := path(func(p point) float64 { return float64(p.tokens) }, float64(tok))
	cl, ca := path(func(p point) float64 { return p.usd }, usd)
	known := true
	for _, a := range v.Agents {
		known = known && a.Cost.Known
	}
	return []chart{
		{Title: "tokens over time", Max: thousands(tok), From: stamp, To: span, W: w, H: h, Line: tl, Area: ta},
		{Title: "cost over time", Max: Money{USD: usd, Known: known}.String(), From: stamp, To: span, W: w, H: h, Line: cl, Area: ca},
	}
}
