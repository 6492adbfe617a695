package traceview

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
)

// The view holds what the store holds, and the diff of every write: an
// edit of a file the run had read is a diff of the whole file, a new file
// a diff from nothing.
func TestViewOfARun(t *testing.T) {
	st := fileStore(t)
	res := demoRun(t, st)
	v, err := Load(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := st.Run(context.Background(), res.RunID)
	a := v.Agents[0]
	if a.Steps != run.Steps || a.Usage.In != run.Usage.InputTokens || a.Cost.USD != run.Cost.USD || a.Outcome != "success" || len(a.StepList) != run.Steps {
		t.Fatalf("agent %+v, run %+v", a, run)
	}
	var got []string
	for _, s := range a.StepList {
		for _, tl := range s.Tools {
			got = append(got, fmt.Sprintf("%d %s %s", s.N, tl.Name, tl.Outcome))
		}
	}
	want := []string{"1 read_file ok", "1 read_file refused", "2 edit_file ok", "3 write_file ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	edit := a.StepList[1].Tools[0]
	if edit.Write != "greet.txt" || !strings.Contains(edit.Diff, "-hello, wrld\n+hello, world\n") || edit.DiffNote != "" {
		t.Errorf("the edit's diff: %+v", edit)
	}
	write := a.StepList[2].Tools[0]
	if !strings.Contains(write.Diff, "--- /dev/null") || !strings.Contains(write.Diff, "+fixed the greeting") {
		t.Errorf("the new file's diff: %+v", write)
	}
	if len(a.StepList[0].Attempts) != 1 || a.StepList[0].Attempts[0].ErrorKind != "rate_limited" || a.Counts.Retries != 1 {
		t.Errorf("the retry: %+v %+v", a.StepList[0].Attempts, a.Counts)
	}
	if refused := a.StepList[0].Tools[1]; len(refused.Verdicts) != 1 || refused.Verdicts[0].Effect != "deny" || refused.Verdicts[0].Layer != "secrets" {
		t.Errorf("the refusal's verdict: %+v", refused)
	}
	if s := a.StepList[2]; len(s.Approvals) != 2 || s.Approvals[1].Decision != "approve" || s.Gate == nil || !s.Gate.Passed || len(s.Gate.Checks) != 1 {
		t.Errorf("the approved write's step: %+v %+v", s.Approvals, s.Gate)
	}
	if g := a.StepList[1].Gate; g == nil || g.Passed || !strings.Contains(g.Text, "NOTES.md does not exist") {
		t.Errorf("the failed gate: %+v", g)
	}
	if a.StepList[0].Model == nil || a.StepList[0].Model.FirstTokenMS <= 0 || a.StepList[0].Model.StopReason != "tool_use" {
		t.Errorf("the model call: %+v", a.StepList[0].Model)
	}
}

// The page, in a real browser, shows the numbers the store holds — steps,
// tokens, cost, outcome, each step's tokens — and the diff of a write;
// it makes no request; a screenshot is taken.
func TestPageInABrowser(t *testing.T) {
	b := startBrowser(t)
	st := fileStore(t)
	res := demoRun(t, st)
	v, err := Load(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	url, size := writePage(t, v)
	p := open(t, b, url+"#step=2")
	run, _ := st.Run(context.Background(), res.RunID)
	steps, _ := st.Steps(context.Background(), res.RunID)
	got := eval[map[string]string](t, p, `(() => { const v = (id) => document.getElementById(id).dataset.value;
		return {steps: v("sum-steps"), in: v("sum-tokens-in"), out: v("sum-tokens-out"), cost: v("sum-cost"), outcome: v("sum-outcome")} })()`)
	want := map[string]string{"steps": fmt.Sprint(run.Steps), "in": fmt.Sprint(run.Usage.InputTokens), "out": fmt.Sprint(run.Usage.OutputTokens),
		"cost": fmt.Sprintf("%.6f", run.Cost.USD), "outcome": run.Outcome}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the page's numbers (-store +page):\n%s", diff)
	}
	rows := eval[[][3]string](t, p, `[...document.querySelectorAll(".step-row")].map((r) => [r.dataset.step, r.querySelector(".step-tokens").dataset.in, r.querySelector(".step-tokens").dataset.out])`)
	var wantRows [][3]string
	for _, s := range steps {
		wantRows = append(wantRows, [3]string{fmt.Sprint(s.Step), fmt.Sprint(s.Usage.InputTokens), fmt.Sprint(s.Usage.OutputTokens)})
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("the step rows (-store +page):\n%s", diff)
	}
	detail := eval[string](t, p, `document.getElementById("detail-body").innerText`)
	for _, want := range []string{"-hello, wrld", "+hello, world", "allow write greet.txt", "gate not passed", "NOTES.md does not exist"} {
		if !strings.Contains(strings.ToLower(detail), strings.ToLower(want)) {
			t.Errorf("step 2's detail lacks %q:\n%s", want, detail)
		}
	}
	if reqs := p.Requests(); len(reqs) != 1 || !strings.HasPrefix(reqs[0], url) {
		t.Errorf("the page asked for %v", reqs)
	}
	if c := p.Console(); len(c) != 0 {
		t.Errorf("the page logged %v", c)
	}
	t.Logf("page of a %d-step run: %d bytes, drawn in %s ms (script) / %s ms (since navigation)", run.Steps, size,
		eval[string](t, p, `document.body.dataset.renderMs`), eval[string](t, p, `document.body.dataset.readyMs`))
	screenshot(t, p, "trace-run.png")
}

// A tree of 1,111 agents: the page shows the tree's totals as the store
// holds them, draws only the agent rows the window shows, finds an agent
// deep in the tree by its link, and a screenshot is taken.
func TestTreePageInABrowser(t *testing.T) {
	b := startBrowser(t)
	st := memStore(t)
	root, n := treeStore(t, st, 10, 3, 2)
	v, err := Load(context.Background(), st, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Agents) != n || n != 1111 {
		t.Fatalf("%d agents in the view, %d in the store", len(v.Agents), n)
	}
	var steps int
	var tokens int64
	var cost float64
	runs, _ := st.Runs(context.Background(), storeFilterAll())
	for _, r := range runs {
		steps += r.Steps
		tokens += r.Usage.Total()
		cost += r.Cost.USD
	}
	url, size := writePage(t, v)
	deep := v.Agents[len(v.Agents)-1]
	p := open(t, b, url+"#agent="+deep.ID)
	got := eval[map[string]string](t, p, `(() => { const v = (id) => document.getElementById(id).dataset.value;
		return {agents: v("tree-agents"), steps: v("tree-steps"), tokens: v("tree-tokens"), cost: v("tree-cost")} })()`)
	want := map[string]string{"agents": fmt.Sprint(len(runs)), "steps": fmt.Sprint(steps), "tokens": fmt.Sprint(tokens), "cost": fmt.Sprintf("%.6f", cost)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the tree's numbers (-store +page):\n%s", diff)
	}
	drawn := eval[int](t, p, `document.querySelectorAll(".agent-row").length`)
	if drawn == 0 || drawn >= n/4 {
		t.Errorf("%d agent rows drawn for %d agents: the list is not virtual", drawn, n)
	}
	if title := eval[string](t, p, `document.getElementById("agent-title").textContent`); !strings.HasPrefix(title, deep.Path+" ·") {
		t.Errorf("the linked agent is not shown: %q", title)
	}
	t.Logf("page of a %d-agent tree: %d bytes, drawn in %s ms (script) / %s ms (since navigation)", n, size,
		eval[string](t, p, `document.body.dataset.renderMs`), eval[string](t, p, `document.body.dataset.readyMs`))
	screenshot(t, p, "trace-tree.png")
}

// A 2,000-step run, driven by the harness: the page holds every step,
// draws only those the window shows, and stays quick to open.
func TestLongRunPageInABrowser(t *testing.T) {
	b := startBrowser(t)
	st := fileStore(t)
	st = memStore(t)
	var turns []scripted.Turn
	for i := range 1997 {
		turns = append(turns, scripted.Turn{Text: fmt.Sprintf("Writing part %d.", i),
			ToolCalls: []scripted.Call{{Name: "write_file", Arguments: args(map[string]string{"path": fmt.Sprintf("parts/p%04d.txt", i%50), "content": fmt.Sprintf("part %d\nline two\n", i)})}},
			Usage:     &provider.Usage{InputTokens: 900, OutputTokens: 25}, CostUSD: usd(0.0004)})
	}
	res := demoRun(t, st, turns...)
	v, err := Load(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(v.Agents[0].StepList); got < 2000 {
		t.Fatalf("%d steps", got)
	}
	url, size := writePage(t, v)
	p := open(t, b, url+"#step=1500")
	drawn := eval[int](t, p, `document.querySelectorAll(".step-row").length`)
	if drawn == 0 || drawn > 200 {
		t.Errorf("%d step rows drawn for %d steps", drawn, len(v.Agents[0].StepList))
	}
	if sel := eval[string](t, p, `document.querySelector(".step-row.sel") && document.querySelector(".step-row.sel").dataset.step`); sel != "1500" {
		t.Errorf("step 1500 is not shown: %q", sel)
	}
	// A later write of a file the run wrote before is a diff against it.
	if d := eval[string](t, p, `document.getElementById("detail-body").innerText`); !strings.Contains(d, "-part 1447") || !strings.Contains(d, "+part 1497") {
		t.Errorf("step 1500's diff:\n%s", d)
	}
	t.Logf("page of a %d-step run: %d bytes, drawn in %s ms (script) / %s ms (since navigation)", len(v.Agents[0].StepList), size,
		eval[string](t, p, `document.body.dataset.renderMs`), eval[string](t, p, `document.body.dataset.readyMs`))
}

// What a run writes is data, never markup: a model, a file name or a goal
// that carries HTML or a script does not run in the page. The control is
// the same view put in a page without escaping or a content security
// policy, where the payload runs.
func TestPageEscapesRunContent(t *testing.T) {
	b := startBrowser(t)
	st := fileStore(t)
	payload := `<img src=x onerror="window.__pwned=1;document.title='pwned'"></script><script>window.__pwned=2</script>`
	res := demoRun(t, st, scripted.Turn{Text: "here: " + payload,
		ToolCalls: []scripted.Call{{Name: "write_file", Arguments: args(map[string]string{"path": "x<svg onload=window.__pwned=3>.txt", "content": payload})}}})
	v, err := Load(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := writePage(t, v)
	p := open(t, b, url+"#step=3")
	if got := eval[any](t, p, `window.__pwned === undefined ? null : window.__pwned`); got != nil {
		t.Fatalf("the payload ran in the page: %v", got)
	}
	if n := eval[int](t, p, `document.querySelectorAll("img, svg[onload], script:not([type])").length`); n != 1 { // the page's own script
		t.Errorf("%d elements came from the payload", n)
	}
	if d := eval[string](t, p, `document.getElementById("detail-body").innerText`); !strings.Contains(d, "<img src=x") {
		t.Errorf("the payload is not shown as text:\n%s", d)
	}

	// The control: the same data spliced into a page as markup.
	naive := template.Must(template.New("naive").Parse(`<!DOCTYPE html><html><body>{{range .Agents}}{{range .StepList}}<p>{{.Text}}</p>{{end}}{{end}}<script>document.body.dataset.ready="1"</script></body></html>`))
	path := filepath.Join(t.TempDir(), "naive.html")
	f, _ := os.Create(path)
	naive.Execute(f, v)
	f.Close()
	p = open(t, b, "file://"+path)
	if got := eval[any](t, p, `new Promise((ok) => setTimeout(() => ok(window.__pwned === undefined ? null : window.__pwned), 200))`); got == nil {
		t.Fatal("the control did not run the payload: the attack proves nothing")
	}
}

// A page asks for nothing: its policy allows no request, and the browser
// sees none but the page. The control is a page that loads an image from
// a local server: the browser's request is seen, and the server gets it.
func TestPageMakesNoRequest(t *testing.T) {
	b := startBrowser(t)
	st := fileStore(t)
	res := demoRun(t, st)
	v, _ := Load(context.Background(), st, res.RunID)
	var b0 strings.Builder
	if err := WriteHTML(&b0, v); err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(b0.String())
	for _, bad := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if !strings.Contains(page, `default-src 'none'`) || !strings.Contains(page, `connect-src 'none'`) {
		t.Error("the page's policy allows requests")
	}
	url, _ := writePage(t, v)
	p := open(t, b, url)
	if reqs := p.Requests(); len(reqs) != 1 {
		t.Errorf("the page asked for %v", reqs)
	}

	hits := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- r.URL.Path }))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "control.html")
	os.WriteFile(path, []byte(`<!DOCTYPE html><img src="`+srv.URL+`/beacon.png"><script>document.body.dataset.ready="1"</script>`), 0o644)
	p = open(t, b, "file://"+path)
	if reqs := p.Requests(); len(reqs) != 2 || !strings.HasSuffix(reqs[1], "/beacon.png") {
		t.Errorf("the control's requests: %v", reqs)
	}
	if got := <-hits; got != "/beacon.png" {
		t.Errorf("the control's server got %q", got)
	}
}
