package harness_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

const (
	killStoreEnv = "IOH_TEST_KILL_STORE"
	killRootEnv  = "IOH_TEST_KILL_ROOT"
	// killLatencyEnv sets the child's latency per model turn, in ms.
	killLatencyEnv = "IOH_TEST_KILL_LATENCY_MS"
	// killHangEnv names a turn the child's model never answers.
	killHangEnv = "IOH_TEST_KILL_HANG_AT"
	killSteps   = 8
)

// killTurns are the turns of the task: step n writes step-n.txt. Their
// usage is estimated from each request, so that what a run spends
// depends on what its requests hold.
func killTurns() []scripted.Turn {
	turns := numbered(killSteps)
	for i := range turns {
		turns[i].Usage = nil
	}
	return turns
}

// killTask is the task both processes drive.
func killTask(root string) harness.TaskContract {
	return harness.TaskContract{Goal: "write the numbered files", Root: root,
		Verification: []verify.Check{contains("step-"+strconv.Itoa(killSteps)+".txt", strconv.Itoa(killSteps))}}
}

// TestKillNineChild is the process TestKillNine kills. It drives a run that
// takes 120ms per model turn, and hangs on a turn when told to.
func TestKillNineChild(t *testing.T) {
	path := os.Getenv(killStoreEnv)
	if path == "" {
		return // a helper process: it runs only when TestKillNine starts it
	}
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	turns := killTurns()
	latency := 120
	if v, err := strconv.Atoi(os.Getenv(killLatencyEnv)); err == nil {
		latency = v
	}
	for i := range turns {
		turns[i].LatencyMS = latency
	}
	if n, err := strconv.Atoi(os.Getenv(killHangEnv)); err == nil && n >= 1 && n <= len(turns) {
		turns[n-1].LatencyMS = int(time.Hour / time.Millisecond)
	}
	harness.Run(context.Background(), killTask(os.Getenv(killRootEnv)), harness.Options{Provider: script(t, turns...), Store: st})
	t.Fatal("the run finished before it was killed")
}

// A real process is killed with SIGKILL in the middle of a run, while its
// model is answering the fourth turn; a new driver resumes it from the
// store file: no step is repeated, none is lost, the run finishes, and it
// has spent, to the token, what an uninterrupted run of the same task
// spends.
func TestKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestKillNine starts and kills a process")
	}
	// The reference: the same task, run once without a kill.
	ref, err := harness.Run(context.Background(), killTask(workspace(t, nil)), harness.Options{Provider: script(t, killTurns()...), Store: memStore(t)})
	if err != nil || ref.Outcome.Kind != harness.Success || ref.Outcome.Steps != killSteps {
		t.Fatalf("the uninterrupted run: %+v, %v", ref, err)
	}

	dir := t.TempDir()
	root := filepath.Join(dir, "ws")
	os.Mkdir(root, 0o755)
	path := filepath.Join(dir, "trace.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killStoreEnv+"="+path, killRootEnv+"="+root, killHangEnv+"=4")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	// Wait for three committed steps, reading the file the child writes.
	var runID string
	deadline := time.Now().Add(hangGuard)
	for runID == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the child committed no three steps in %s", hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			continue // not created yet
		}
		runs, err := st.Runs(context.Background(), store.RunFilter{})
		st.Close()
		if err == nil && len(runs) == 1 && runs[0].Steps >= 3 {
			runID = runs[0].ID
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true

	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before, err := st.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if before.Status != store.StatusRunning || before.Steps != 3 {
		t.Fatalf("killed run: status %s after %d steps, want running after 3", before.Status, before.Steps)
	}
	rec := &recorder{Provider: script(t, killTurns()...)}
	res, err := harness.Resume(context.Background(), runID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != killSteps {
		t.Fatalf("resumed outcome %+v", res.Outcome)
	}
	if rec.count() != killSteps-before.Steps {
		t.Errorf("the resume sent %d requests after %d of %d steps had committed", rec.count(), before.Steps, killSteps)
	}
	assertSteps(t, st, runID, killSteps)
	if got, want := res.Outcome.Usage, ref.Outcome.Usage; got != want {
		t.Errorf("the resumed run spent %+v, an uninterrupted run of the task %+v: the killed process's spend is lost or counted twice, or the resume asked other questions", got, want)
	}
	for i := 1; i <= killSteps; i++ {
		data, err := os.ReadFile(filepath.Join(root, "step-"+strconv.Itoa(i)+".txt"))
		if err != nil || string(data) != strconv.Itoa(i) {
			t.Errorf("step-%d.txt = %q, %v", i, data, err)
		}
	}
}

// A live driver's run is refused to a second driver, before it sends a
// request: the resume fails with ErrConflict naming the holder and its
// provider is never called. Once the first driver is killed, the run is
// taken over at once (its process is gone), and finishes with every step
// once. The negative control is Force, which takes the run from the live
// driver.
func TestSecondDriverIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the test starts and kills a process")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "ws")
	os.Mkdir(root, 0o755)
	path := filepath.Join(dir, "trace.db")
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineChild$", "-test.count=1")
		// Slow turns: the races must meet a driver that is still driving.
		cmd.Env = append(os.Environ(), killStoreEnv+"="+path, killRootEnv+"="+root, killLatencyEnv+"=500")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmd := start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	runID := waitSteps(t, path, 1)
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for race := range 10 {
		rec := &recorder{Provider: script(t, killTurns()...)}
		_, err := harness.Resume(context.Background(), runID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
		var le *store.LeaseError
		if !errors.Is(err, harness.ErrConflict) || !errors.As(err, &le) || le.Holder.Owner.PID != cmd.Process.Pid {
			t.Fatalf("race %d: a second driver got %v", race, err)
		}
		if rec.count() != 0 {
			t.Fatalf("race %d: the refused driver sent %d requests", race, rec.count())
		}
		time.Sleep(time.Duration(20+race*15) * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	before, _ := st.Run(context.Background(), runID)
	rec := &recorder{Provider: script(t, numbered(killSteps)...)}
	res, err := harness.Resume(context.Background(), runID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("after the driver died: %+v, %v", res, err)
	}
	if rec.count() != killSteps-before.Steps {
		t.Errorf("the new driver sent %d requests for %d steps left", rec.count(), killSteps-before.Steps)
	}
	assertSteps(t, st, runID, killSteps)

	// Force takes a run from a live driver, whose later writes are fenced
	// out: the run ends with every step exactly once.
	os.RemoveAll(root)
	os.Mkdir(root, 0o755)
	path = filepath.Join(dir, "trace2.db")
	cmd = start()
	runID = waitSteps(t, path, 1)
	st2, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	res, err = harness.Resume(context.Background(), runID, harness.Options{Provider: script(t, numbered(killSteps)...), Store: st2}, harness.ResumeOptions{Force: true})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("a forced takeover: %+v, %v", res, err)
	}
	assertSteps(t, st2, runID, killSteps)
}

// hangGuard bounds a wait only so that a hung test fails instead of
// hanging: it is far beyond what any wait here takes, however loaded the
// machine, and no test judges a duration by it.
const hangGuard = 2 * time.Minute

// waitSteps waits for the store at path to hold one run with at least n
// committed steps, and returns its id.
func waitSteps(t *testing.T, path string, n int) string {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		st, err := sqlite.OpenReadOnly(context.Background(), path)
		if err != nil {
			continue
		}
		runs, err := st.Runs(context.Background(), store.RunFilter{})
		st.Close()
		if err == nil && len(runs) == 1 && runs[0].Steps >= n {
			return runs[0].ID
		}
	}
	t.Fatalf("no run with %d committed steps in %s", n, hangGuard)
	return ""
}
