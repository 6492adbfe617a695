package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// SubmitOptions say how a run is submitted.
type SubmitOptions struct {
	// Upload stores a snapshot of the workspace with the submission, for
	// workers that do not share this machine's filesystem: the worker
	// that claims the run materialises it, and the workspace the run
	// leaves is stored back for Fetch. Without it, the task's path must
	// be on a filesystem every worker mounts at the same path.
	Upload bool
	// Owner is who submits, for the queue log; zero means this process.
	Owner store.Owner
}

// Submit validates spec (the JSON run spec, docs/spec.md), records its run
// as queued, and enqueues it, in one transaction; it returns the run's id
// without waiting for a worker.
//
// The spec is stored for the workers, so it must not carry a key: a
// worker reads provider keys from its own environment, as the CLI does.
//
// # Errors
//
// A spec that does not validate, that carries an api_key, or that no
// worker could drive (a provider no worker can build: an unknown name, a
// field that does not apply) is a *harness.Error of kind ErrConfig naming
// the field, as `run` refuses it; a workspace too large
// to upload is ErrConfig too; the store's failures are the store's errors.
func Submit(ctx context.Context, st *postgres.Store, spec []byte, o SubmitOptions) (string, error) {
	s, err := harness.ParseSpec(spec)
	if err != nil {
		return "", err
	}
	if err := keyless(&s); err != nil {
		return "", err
	}
	// What every worker would refuse is refused here: the spec is built
	// into options as a worker builds it, in an environment that sets
	// every provider's key, model and base URL, as a worker's may.
	if _, err := specOptions(spec, anyWorker); err != nil {
		return "", err
	}
	task, err := json.Marshal(s.Task)
	if err != nil {
		return "", &harness.Error{Kind: harness.ErrConfig, Field: "task", Err: err}
	}
	var policyJSON json.RawMessage
	if s.Policy != nil {
		if policyJSON, err = json.Marshal(s.Policy); err != nil {
			return "", &harness.Error{Kind: harness.ErrConfig, Field: "policy", Err: err}
		}
	}
	owner := o.Owner
	if owner == (store.Owner{}) {
		owner = store.Self()
	}
	now := time.Now()
	id := store.NewRunID()
	sub := &postgres.Submission{RunID: id, Spec: spec, Workspace: "shared", SubmittedBy: ownerName(owner), SubmittedAt: now}
	where := s.Task.Root
	if s.Task.SingleFile() {
		where = s.Task.File
	}
	detail := fmt.Sprintf("by %s; the workspace is shared at %s", ownerName(owner), where)
	var snap *postgres.Snapshot
	if o.Upload {
		dir := workspaceDir(&s.Task)
		data, files, size, err := pack(dir)
		if err != nil {
			return "", &harness.Error{Kind: harness.ErrConfig, Field: "task.root", Message: "upload the workspace: " + err.Error()}
		}
		snap = &postgres.Snapshot{RunID: id, Kind: "input", Data: data, Files: files, Bytes: size}
		sub.Workspace = "upload"
		detail = fmt.Sprintf("by %s; the workspace %s is uploaded (%d files, %d bytes)", ownerName(owner), dir, files, size)
	}
	started, err := json.Marshal(&harness.Event{RunID: id, Path: "root", Seq: 1, Kind: harness.EventRunStarted, At: now,
		Provider: s.Provider.Name, Text: s.Task.Goal})
	if err != nil {
		return "", fmt.Errorf("fleet: encode the first event: %w", err)
	}
	if err := Migrate(ctx, st); err != nil {
		return "", err
	}
	c, err := inserter(st)
	if err != nil {
		return "", err
	}
	run := &store.Run{ID: id, AgentPath: "root", Task: task, Policy: policyJSON, Provider: s.Provider.Name, StartedAt: now}
	events := []store.Event{{Seq: 1, Kind: string(harness.EventRunStarted), At: now, Data: started}}
	entry := &postgres.QueueEntry{Action: ActionSubmitted, Detail: detail}
	if err := st.CreateQueued(ctx, run, events, sub, snap, entry, enqueue(c, Args{RunID: id})); err != nil {
		return "", err
	}
	return id, nil
}

// keyless refuses a spec that carries a provider key: the spec is stored
// for the workers, and a key is never stored.
func keyless(s *harness.Spec) error {
	if s.Provider.APIKey != "" {
		return &harness.Error{Kind: harness.ErrConfig, Field: "provider.api_key",
			Message: "a submitted spec is stored for the workers and must not carry a key; give the workers the key in their environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...)"}
	}
	for i, f := range s.Fallbacks {
		if f.APIKey != "" {
			return &harness.Error{Kind: harness.ErrConfig, Field: fmt.Sprintf("fallbacks[%d].api_key", i),
				Message: "a submitted spec is stored for the workers and must not carry a key; give the workers the key in their environment"}
		}
	}
	return nil
}

// The actions of the queue log.
const (
	ActionSubmitted      = "submitted"
	ActionClaimed        = "claimed"
	ActionSnoozed        = "snoozed"
	ActionPaused         = "paused"
	ActionFinished       = "finished"
	ActionHandedBack     = "handed_back"
	ActionRescued        = "rescued"
	ActionRefused        = "refused"
	ActionFailed         = "failed"
	ActionDecisionQueued = "decision_queued"
	ActionMaterialised   = "materialised"
	ActionStoredResult   = "stored_result"
)
