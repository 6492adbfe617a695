package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

const (
	deferModeEnv  = "IOH_TEST_DEFER_MODE"
	deferStoreEnv = "IOH_TEST_DEFER_STORE"
	deferRootEnv  = "IOH_TEST_DEFER_ROOT"
	deferArgEnv   = "IOH_TEST_DEFER_ARG"
)

func deferTurns() []scripted.Turn {
	return []scripted.Turn{
		calls(write("config.toml", "mode = \"approved\"\n")),
		calls(write("done.txt", "done")),
	}
}

func deferTask(root string) harness.TaskContract {
	return harness.TaskContract{Goal: "change the config", Root: root, Verification: []verify.Check{contains("done.txt", "done")}}
}

// TestDeferralChild is the process TestTwoProcessDeferral starts: "start"
// drives the run until it awaits approval and exits, printing the request
// id; "approve" answers it in a fresh process; "approve-frozen" answers it
// under a policy that has since frozen the file.
func TestDeferralChild(t *testing.T) {
	mode := os.Getenv(deferModeEnv)
	if mode == "" {
		return // a helper process: it runs only when its test starts it
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv(deferStoreEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := testPolicy()
	opts := harness.Options{Provider: script(t, deferTurns()...), Store: st, Policy: p, Approver: approve.DeferAll()}
	switch mode {
	case "start":
		res, err := harness.Run(ctx, deferTask(os.Getenv(deferRootEnv)), opts)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("RESULT %s %s %s\n", res.Outcome.Kind, res.RunID, res.Outcome.RequestID)
	case "approve", "approve-frozen":
		if mode == "approve-frozen" {
			p.Layers = append(p.Layers, policy.Layer{Name: "freeze", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Deny, Pattern: "config.toml"}}})
		}
		runID, reqID, _ := strings.Cut(os.Getenv(deferArgEnv), " ")
		opts.Approver = approve.ApproveAll()
		res, err := harness.ResumeWithDecision(ctx, runID, reqID, approve.Decision{Kind: approve.Approve}, opts, harness.ResumeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("RESULT %s %s\n", res.Outcome.Kind, res.RunID)
	}
}

// A real process runs until the run awaits approval and exits; a second
// process supplies the decision; the run finishes with exactly the
// approved content on disk — or, when the policy changed in between, with
// the action refused and nothing written.
func TestTwoProcessDeferral(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestTwoProcessDeferral starts processes")
	}
	for _, tc := range []struct {
		mode, wantFile string
	}{
		{"approve", "mode = \"approved\"\n"},
		{"approve-frozen", "mode = \"original\"\n"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			root := workspace(t, map[string]string{"config.toml": "mode = \"original\"\n"})
			dbPath := filepath.Join(dir, "trace.db")
			child := func(mode, arg string) []string {
				cmd := exec.Command(os.Args[0], "-test.run=^TestDeferralChild$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), deferModeEnv+"="+mode, deferStoreEnv+"="+dbPath, deferRootEnv+"="+root, deferArgEnv+"="+arg)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s process: %v\n%s", mode, err, out)
				}
				for _, line := range strings.Split(string(out), "\n") {
					if f, ok := strings.CutPrefix(line, "RESULT "); ok {
						return strings.Fields(f)
					}
				}
				t.Fatalf("%s process printed no result:\n%s", mode, out)
				return nil
			}
			first := child("start", "")
			if first[0] != string(harness.AwaitingApproval) {
				t.Fatalf("first process ended %v", first)
			}
			if data, _ := os.ReadFile(filepath.Join(root, "config.toml")); string(data) != "mode = \"original\"\n" {
				t.Fatalf("the write happened before the decision: %q", data)
			}
			second := child(tc.mode, first[1]+" "+first[2])
			if second[0] != string(harness.Success) || second[1] != first[1] {
				t.Fatalf("second process: %v", second)
			}
			if data, _ := os.ReadFile(filepath.Join(root, "config.toml")); string(data) != tc.wantFile {
				t.Errorf("config.toml = %q, want %q", data, tc.wantFile)
			}
			st, err := sqlite.Open(context.Background(), dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			a, err := st.Approval(context.Background(), first[1], first[2])
			if err != nil || a.State != store.ApprovalApplied {
				t.Errorf("approval %+v, %v", a, err)
			}
		})
	}
}
