package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// The official conformance suite's client scenarios, run against this
// package's client: the test binary run with IOH_MCP_CONFORMANCE=1 is the
// client the suite starts, with the scenario server's URL as its last
// argument. The OAuth scenarios are not run: the client has no OAuth.

var conformanceScenarios = []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"}

// runConformanceClient is the client the suite runs.
func runConformanceClient() {
	if err := conformanceClient(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func conformanceClient(raw, scenario string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	// The scenario server listens on loopback and is announced as
	// localhost. The address floor lifts only an address the policy names
	// literally (a name's answers are its DNS's to change), so the client
	// is given the address, and the policy names it.
	if u.Hostname() == "localhost" {
		u.Host = "127.0.0.1:" + u.Port()
	}
	srv := mcp.Server{Name: "conformance", URL: u.String(), CallTimeout: sandbox.Duration(20 * time.Second)}
	ctx := context.Background()
	c, err := mcp.Connect(ctx, mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(allowNet(u.Host)),
		Elicit: func(ctx context.Context, e mcp.Elicitation) (mcp.ElicitationResult, error) {
			// Accept with the defaults the schema gives.
			var schema struct {
				Properties map[string]struct {
					Default any `json:"default"`
				} `json:"properties"`
			}
			json.Unmarshal(e.Schema, &schema)
			content := map[string]any{}
			for k, p := range schema.Properties {
				if p.Default != nil {
					content[k] = p.Default
				}
			}
			return mcp.ElicitationResult{Action: mcp.ElicitAccept, Content: content}, nil
		}})
	if err != nil {
		return err
	}
	defer c.Close()
	args := map[string]string{"add_numbers": `{"a": 5, "b": 3}`}
	for _, tl := range c.Tools() {
		a := args[tl.(*mcp.Tool).Remote()]
		if a == "" {
			a = "{}"
		}
		r := tl.Call(ctx, nil, json.RawMessage(a))
		fmt.Fprintf(os.Stderr, "%s → %s\n", tl.Spec().Name, r.Output)
	}
	return nil
}

func TestConformance(t *testing.T) {
	js := npmPackage(t, "@modelcontextprotocol/conformance/dist/index.js")
	node, _ := lookNode()
	exe, _ := os.Executable()
	out := t.TempDir()
	ran, passed := 0, 0
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			dir := filepath.Join(out, sc)
			cmd := exec.Command(node, js, "client", "--command", exe, "--scenario", sc, "--timeout", "60000", "-o", dir)
			cmd.Env = append(os.Environ(), "IOH_MCP_CONFORMANCE=1")
			cmd.Dir = npmDir()
			b, err := cmd.CombinedOutput()
			checks := conformanceChecks(t, dir)
			if len(checks) == 0 {
				t.Fatalf("the scenario ran no checks (a vacuous pass); its output:\n%s", b)
			}
			for _, c := range checks {
				if c.Status != "SUCCESS" && c.Status != "INFO" {
					t.Errorf("check %s: %s: %s", c.ID, c.Status, c.Description)
				}
			}
			if err != nil {
				t.Errorf("conformance %s: %v\n%s", sc, err, b)
			}
			if sc == "initialize" && !hasCheck(checks, "mcp-client-initialization") {
				t.Errorf("no mcp-client-initialization check: the client never sent initialize")
			}
			ran += len(checks)
			for _, c := range checks {
				if c.Status == "SUCCESS" {
					passed++
				}
			}
		})
	}
	if passed == 0 {
		t.Fatalf("no conformance check passed")
	}
	t.Logf("%d conformance checks ran over %d scenarios, %d of them SUCCESS, the rest INFO", ran, len(conformanceScenarios), passed)
}

type conformanceCheck struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Description string `json:"description"`
}

func conformanceChecks(t *testing.T, dir string) []conformanceCheck {
	var out []conformanceCheck
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, cs...)
	}
	return out
}

func hasCheck(cs []conformanceCheck, id string) bool {
	for _, c := range cs {
		if strings.Contains(c.ID, id) {
			return true
		}
	}
	return false
}
