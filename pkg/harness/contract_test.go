package harness_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Every bad field is a configuration error that names the field.
func TestParseTaskNamesTheBadField(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), nil, 0o644)
	root, _ := json.Marshal(dir)
	file, _ := json.Marshal(filepath.Join(dir, "f.txt"))
	check := `"verification":[{"kind":"workspace_file_contains","file":"a","text":"b"}]`
	tests := []struct {
		name, json, field string
	}{
		{"no goal", `{"root":` + string(root) + `,` + check + `}`, "goal"},
		{"blank goal", `{"goal":"  ","root":` + string(root) + `,` + check + `}`, "goal"},
		{"neither file nor root", `{"goal":"g",` + check + `}`, "file"},
		{"both file and root", `{"goal":"g","file":` + string(file) + `,"root":` + string(root) + `,` + check + `}`, "root"},
		{"missing root", `{"goal":"g","root":"/no/such/dir",` + check + `}`, "root"},
		{"file in missing dir", `{"goal":"g","file":"/no/such/dir/f.txt","verification":[{"kind":"file_contains","text":"x"}]}`, "file"},
		{"unknown check", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"vibes"}]}`, "verification[0].kind"},
		{"check without text", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"workspace_file_contains","file":"a"}]}`, "verification[0].text"},
		{"check outside root", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"workspace_file_contains","file":"../x","text":"a"}]}`, "verification[0].file"},
		{"absolute check file", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"file_contains","file":"/etc/passwd","text":"a"}]}`, "verification[0].file"},
		{"file_equals without content", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"file_equals","file":"a"}]}`, "verification[0].content"},
		{"bad schema", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"json_schema","file":"a","schema":{"type":12}}]}`, "verification[0].schema"},
		{"remote schema ref", `{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"json_schema","file":"a","schema":{"$ref":"https://example.com/s.json"}}]}`, "verification[0].schema"},
		{"other file in single-file task", `{"goal":"g","file":` + string(file) + `,"verification":[{"kind":"file_contains","file":"other.txt","text":"x"}]}`, "verification[0].file"},
		{"negative steps", `{"goal":"g","root":` + string(root) + `,` + check + `,"budgets":{"max_steps":-1}}`, "budgets.max_steps"},
		{"negative tokens", `{"goal":"g","root":` + string(root) + `,` + check + `,"budgets":{"max_tokens":-5}}`, "budgets.max_tokens"},
		{"negative money", `{"goal":"g","root":` + string(root) + `,` + check + `,"budgets":{"max_cost_usd":-0.5}}`, "budgets.max_cost_usd"},
		{"negative retries", `{"goal":"g","root":` + string(root) + `,` + check + `,"budgets":{"max_retries":-1}}`, "budgets.max_retries"},
		{"time as a number", `{"goal":"g","root":` + string(root) + `,` + check + `,"budgets":{"time":90}}`, ""},
		{"bad duration", `{"goal":"g","root":` + string(root) + `,` + check + `,"budgets":{"time":"soon"}}`, ""},
		{"wrong type", `{"goal":7,"root":` + string(root) + `,` + check + `}`, "goal"},
		{"unknown field", `{"goal":"g","root":` + string(root) + `,` + check + `,"max_steps":3}`, "max_steps"},
		{"newer version", `{"version":2,"goal":"g","root":` + string(root) + `,` + check + `}`, "version"},
		{"empty constraint", `{"goal":"g","root":` + string(root) + `,` + check + `,"constraints":[""]}`, "constraints[0]"},
		{"not JSON", `{"goal":`, ""},
		{"trailing data", `{"goal":"g","root":` + string(root) + `,` + check + `} {}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := harness.ParseTask([]byte(tt.json))
			var he *harness.Error
			if !errors.Is(err, harness.ErrConfig) || !errors.As(err, &he) {
				t.Fatalf("err = %v, want a configuration error", err)
			}
			if he.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", he.Field, tt.field, err)
			}
			if tt.field == "" && he.Message == "" {
				t.Errorf("an error without a field has no message: %v", err)
			}
		})
	}
}

// The contract's JSON form is stable: a full contract encodes to the
// golden file and decodes back to itself. Run with -update to rewrite.
func TestContractJSONGolden(t *testing.T) {
	content := "exact\n"
	retries := 3
	task := harness.TaskContract{
		Version: 1,
		Goal:    "make the test pass",
		Root:    "/work/project",
		Verification: []verify.Check{
			{Kind: "workspace_file_contains", File: "src/lib.rs", Text: "fn add"},
			{Kind: "file_equals", File: "VERSION", Content: &content},
			{Kind: "json_schema", File: "out.json", Schema: json.RawMessage(`{"type":"object","required":["ok"]}`)},
		},
		Constraints:     []string{"do not touch the tests"},
		ExpectedOutput:  "a passing test suite",
		SuccessCriteria: []string{"cargo test passes"},
		Budgets: harness.Budgets{MaxSteps: 20, Time: harness.Duration(10 * 60e9), MaxTokens: 200000,
			MaxCostUSD: 1.5, MaxRetries: &retries},
	}
	got, err := json.MarshalIndent(task, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "contract.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(want)), string(got)); diff != "" {
		t.Errorf("contract JSON (-golden +got):\n%s", diff)
	}
	var back harness.TaskContract
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.MarshalIndent(back, "", "  ")
	if diff := cmp.Diff(string(got), string(again)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// FuzzParseTask feeds arbitrary JSON to the contract parser: it never
// panics, every failure is a configuration error, and the JSON form of a
// contract it accepts parses back to the same JSON form.
func FuzzParseTask(f *testing.F) {
	dir := f.TempDir()
	root, _ := json.Marshal(dir)
	f.Add([]byte(`{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"workspace_file_contains","file":"a","text":"b"}]}`))
	f.Add([]byte(`{"goal":"g","root":` + string(root) + `,"verification":[{"kind":"json_schema","file":"a","schema":{"type":"object"}}],"budgets":{"time":"1m","max_retries":0}}`))
	f.Add([]byte(`{"goal":"g","file":` + string(root) + `,"verification":[{"kind":"file_equals","content":""}]}`))
	f.Add([]byte(`{"goal":"","budgets":{"max_cost_usd":1e309}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"verification":[{"kind":"json_schema","file":"a","schema":{"$ref":"#/x"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := harness.ParseTask(data)
		if err != nil {
			if !errors.Is(err, harness.ErrConfig) {
				t.Fatalf("ParseTask error is not a configuration error: %v", err)
			}
			return
		}
		enc, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("an accepted contract does not encode: %v", err)
		}
		back, err := harness.ParseTask(enc)
		if err != nil {
			t.Fatalf("an accepted contract does not parse back: %v\n%s", err, enc)
		}
		again, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(enc), string(again)); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
