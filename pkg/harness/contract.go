package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// ContractVersion is the version of the task contract's JSON form that
// this code writes and the newest it reads.
const ContractVersion = 1

// TaskContract is what a caller asks of the harness: a goal, where the
// agent may work, how the result is checked, and what it may spend.
//
// It has two shapes. A single-file task sets File: the agent edits that one
// file and sees its current content every step. A workspace task sets
// Root: the agent works across the directory tree with the workspace
// tools. Exactly one of the two is set.
//
// Constraints, ExpectedOutput and SuccessCriteria are optional; the model
// sees them. Verification and OutputSchema are the checks: a run succeeds
// when every check passes. A task with neither ends Finished when the
// model answers without a tool call.
type TaskContract struct {
	// Version is the contract format; zero means ContractVersion.
	Version int `json:"version,omitempty"`
	// Goal is what the agent must achieve, in plain words.
	Goal string `json:"goal"`
	// File is the target of a single-file task. A relative path is
	// resolved against the working directory when the task is validated.
	File string `json:"file,omitempty"`
	// Root is the workspace directory of a workspace task. A relative
	// path is resolved against the working directory when the task is
	// validated.
	Root string `json:"root,omitempty"`
	// OutputSchema, when set, is a JSON Schema the model's final answer
	// must match: the run ends on a turn without a tool call whose text
	// is JSON that validates (and, with verification, after which every
	// check passes). The validated answer is Outcome.Output.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Verification is the gate: every check must pass for success. The
	// checks run after every step. A task with no checks and no output
	// schema ends Finished on a turn with no tool call.
	Verification []verify.Check `json:"verification,omitempty"`
	// Constraints are rules the agent must respect.
	Constraints []string `json:"constraints,omitempty"`
	// ExpectedOutput describes the result the caller expects.
	ExpectedOutput string `json:"expected_output,omitempty"`
	// SuccessCriteria say, in words, what a good result is.
	SuccessCriteria []string `json:"success_criteria,omitempty"`
	// Budgets bound the run.
	Budgets Budgets `json:"budgets,omitzero"`
}

// Budgets bound a run. A zero field means its default: MaxSteps 8 for a
// single-file task and 12 for a workspace task, MaxRetries 2, and no time,
// token or money limit.
type Budgets struct {
	// MaxSteps caps the number of steps (model turns).
	MaxSteps int `json:"max_steps,omitempty"`
	// Time caps the wall-clock time of the run, counted from its start,
	// downtime between a crash and a resume included, time spent paused
	// waiting for a person's decision excluded.
	Time Duration `json:"time,omitempty"`
	// MaxTokens caps input plus output tokens over the run.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD caps the money spent over the run, in US dollars.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// MaxRetries is how many times a failed provider call is retried
	// before the harness falls back or escalates. Nil means 2; zero means
	// no retry.
	MaxRetries *int `json:"max_retries,omitempty"`
}

// Duration is a time.Duration whose JSON form is a Go duration string such
// as "90s" or "1h30m".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\" or \"10m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a string such as \"90s\" or \"10m\"", s)
	}
	*d = Duration(v)
	return nil
}

const (
	defaultFileSteps      = 8
	defaultWorkspaceSteps = 12
	defaultRetries        = 2
)

// SingleFile reports whether t is a single-file task.
func (t *TaskContract) SingleFile() bool { return t.File != "" }

// ParseTask reads a task contract from JSON and validates it. Unknown
// fields are errors, so that a misspelt field is not silently dropped.
//
// # Errors
//
// Every problem is an *Error of kind ErrConfig whose Field names the
// offending field.
func ParseTask(data []byte) (TaskContract, error) {
	var t TaskContract
	if err := decodeStrict(data, &t); err != nil {
		return TaskContract{}, err
	}
	return t.resolved()
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data, and reports failures as configuration errors naming the
// field.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonConfigError(err)
	}
	if dec.More() {
		return configError("", "trailing data after the JSON value")
	}
	return nil
}

func jsonConfigError(err error) *Error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return &Error{Kind: ErrConfig, Field: field, Message: fmt.Sprintf("want %s, got JSON %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return &Error{Kind: ErrConfig, Message: fmt.Sprintf("invalid JSON at byte %d", se.Offset), Err: err}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &Error{Kind: ErrConfig, Field: strings.Trim(f, `"`), Message: "unknown field"}
	}
	// A field's own UnmarshalJSON failed; encoding/json names the field
	// in its message ("json: cannot unmarshal ... into Go struct field
	// T.budgets.time ..." or our Duration's text).
	return &Error{Kind: ErrConfig, Message: strings.TrimPrefix(msg, "json: "), Err: err}
}

// Validate checks every field of t. It changes nothing of t: the task the
// harness stores and runs is a copy with File and Root made absolute, the
// defaults of its checks filled and its pinned files read (see
// [ParseTask]), so a task used as a template judges every run by the
// files as they are when that run starts.
//
// # Errors
//
// Every problem is an *Error of kind ErrConfig whose Field names the
// offending field.
func (t *TaskContract) Validate() error {
	_, err := t.resolved()
	return err
}

// resolved returns a copy of t, sharing nothing with it, that is checked
// and resolved: what a run drives.
func (t *TaskContract) resolved() (TaskContract, error) {
	c := *t
	c.Verification = make([]verify.Check, len(t.Verification))
	for i := range t.Verification {
		c.Verification[i] = t.Verification[i].Clone()
	}
	c.Constraints = slices.Clone(t.Constraints)
	c.SuccessCriteria = slices.Clone(t.SuccessCriteria)
	if err := c.resolve(); err != nil {
		return TaskContract{}, err
	}
	return c, nil
}

// resolve checks t and resolves it in place.
func (t *TaskContract) resolve() error {
	if t.Version < 0 || t.Version > ContractVersion {
		return configError("version", "version %d is not supported; this code reads up to %d", t.Version, ContractVersion)
	}
	if strings.TrimSpace(t.Goal) == "" {
		return configError("goal", "required")
	}
	switch {
	case t.File == "" && t.Root == "":
		return configError("file", "set file for a single-file task or root for a workspace task")
	case t.File != "" && t.Root != "":
		return configError("root", "a task has either file (single-file) or root (workspace), not both")
	}
	defaultFile := ""
	if t.File != "" {
		abs, err := absPath(t.File)
		if err != nil {
			return configError("file", "%v", err)
		}
		fi, err := os.Stat(filepath.Dir(abs))
		if err != nil || !fi.IsDir() {
			return configError("file", "the directory of %s does not exist", abs)
		}
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			return configError("file", "%s is a directory", abs)
		}
		t.File = abs
		defaultFile = filepath.Base(abs)
	} else {
		abs, err := absPath(t.Root)
		if err != nil {
			return configError("root", "%v", err)
		}
		fi, err := os.Stat(abs)
		if err != nil || !fi.IsDir() {
			return configError("root", "%s is not a directory", abs)
		}
		t.Root = abs
	}
	if len(t.OutputSchema) > 0 {
		if _, err := verify.CompileSchema(t.OutputSchema); err != nil {
			return configError("output_schema", "%v", err)
		}
	}
	for i := range t.Verification {
		c := &t.Verification[i]
		if err := c.Validate(defaultFile); err != nil {
			var fe *verify.FieldError
			field := fmt.Sprintf("verification[%d]", i)
			if errors.As(err, &fe) {
				return configError(field+"."+fe.Field, "%s", fe.Reason)
			}
			return configError(field, "%v", err)
		}
		if t.File != "" && c.File != "" && c.File != defaultFile {
			return configError(fmt.Sprintf("verification[%d].file", i), "a single-file task can only check its own file %s", defaultFile)
		}
		if err := t.pin(i, c); err != nil {
			return err
		}
	}
	for i, c := range t.Constraints {
		if strings.TrimSpace(c) == "" {
			return configError(fmt.Sprintf("constraints[%d]", i), "empty")
		}
	}
	for i, c := range t.SuccessCriteria {
		if strings.TrimSpace(c) == "" {
			return configError(fmt.Sprintf("success_criteria[%d]", i), "empty")
		}
	}
	return t.Budgets.validate()
}

// merge returns b with every field that over sets replacing b's.
func (b Budgets) merge(over Budgets) Budgets {
	if over.MaxSteps != 0 {
		b.MaxSteps = over.MaxSteps
	}
	if over.Time != 0 {
		b.Time = over.Time
	}
	if over.MaxTokens != 0 {
		b.MaxTokens = over.MaxTokens
	}
	if over.MaxCostUSD != 0 {
		b.MaxCostUSD = over.MaxCostUSD
	}
	if over.MaxRetries != nil {
		b.MaxRetries = over.MaxRetries
	}
	return b
}

func (b *Budgets) validate() error {
	switch {
	case b.MaxSteps < 0:
		return configError("budgets.max_steps", "must not be negative")
	case b.MaxSteps > 100000:
		return configError("budgets.max_steps", "%d is over the limit of 100000", b.MaxSteps)
	case b.Time < 0:
		return configError("budgets.time", "must not be negative")
	case b.MaxTokens < 0:
		return configError("budgets.max_tokens", "must not be negative")
	case b.MaxCostUSD < 0 || b.MaxCostUSD != b.MaxCostUSD:
		return configError("budgets.max_cost_usd", "must be a non-negative number")
	case b.MaxRetries != nil && *b.MaxRetries < 0:
		return configError("budgets.max_retries", "must not be negative")
	case b.MaxRetries != nil && *b.MaxRetries > 100:
		return configError("budgets.max_retries", "%d is over the limit of 100", *b.MaxRetries)
	}
	return nil
}

func absPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("contains a NUL byte")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return abs, nil
}

// maxSteps is the step cap with its default filled in.
func (t *TaskContract) maxSteps() int {
	switch {
	case t.Budgets.MaxSteps > 0:
		return t.Budgets.MaxSteps
	case t.SingleFile():
		return defaultFileSteps
	}
	return defaultWorkspaceSteps
}

// maxRetries is the retry count with its default filled in.
func (t *TaskContract) maxRetries() int {
	if t.Budgets.MaxRetries != nil {
		return *t.Budgets.MaxRetries
	}
	return defaultRetries
}

// describe renders the task for the model.
func (t *TaskContract) describe(extra []verify.Verifier) string {
	var b strings.Builder
	b.WriteString("# Task\n\n")
	b.WriteString(strings.TrimSpace(t.Goal))
	b.WriteString("\n\n")
	if t.SingleFile() {
		fmt.Fprintf(&b, "You work on one file: %s. Its current content is shown to you every step.\n", filepath.Base(t.File))
	} else {
		b.WriteString("You work in a workspace directory. Every path you give a tool is relative to its root.\n")
	}
	if len(t.Constraints) > 0 {
		b.WriteString("\n## Constraints\n")
		for _, c := range t.Constraints {
			b.WriteString("- " + c + "\n")
		}
	}
	if t.ExpectedOutput != "" {
		b.WriteString("\n## Expected output\n" + t.ExpectedOutput + "\n")
	}
	if len(t.SuccessCriteria) > 0 {
		b.WriteString("\n## Success criteria\n")
		for _, c := range t.SuccessCriteria {
			b.WriteString("- " + c + "\n")
		}
	}
	if len(t.Verification)+len(extra) > 0 {
		b.WriteString("\n## Verification\nAfter every step the harness checks:\n")
		for i := range t.Verification {
			b.WriteString("- " + t.Verification[i].Describe() + "\n")
		}
		for _, v := range extra {
			b.WriteString("- " + v.Describe() + "\n")
		}
	}
	if len(t.OutputSchema) > 0 {
		b.WriteString("\n## Final answer\nWhen you are done, answer without calling a tool, with only a JSON value that matches this JSON Schema:\n")
		b.WriteString(compactJSON(t.OutputSchema) + "\n")
	} else if len(t.Verification)+len(extra) == 0 {
		b.WriteString("\n## Final answer\nWhen you are done, answer without calling a tool: that answer ends the run and is its result.\n")
	}
	b.WriteString("\n## Budget\n")
	fmt.Fprintf(&b, "- at most %d steps (one step is one of your turns)\n", t.maxSteps())
	if t.Budgets.Time > 0 {
		fmt.Fprintf(&b, "- at most %s of wall-clock time\n", time.Duration(t.Budgets.Time))
	}
	if t.Budgets.MaxTokens > 0 {
		fmt.Fprintf(&b, "- at most %d tokens, input and output together\n", t.Budgets.MaxTokens)
	}
	if t.Budgets.MaxCostUSD > 0 {
		fmt.Fprintf(&b, "- at most $%s\n", strconv.FormatFloat(t.Budgets.MaxCostUSD, 'f', -1, 64))
	}
	return b.String()
}

// maxPinned bounds the content a check pins.
const maxPinned = 1 << 20

// pin records the content of a check's pinned files as they are now, so
// that the gate judges by them whatever the agent does to them later.
// Content a caller already gave, or a stored task carries, is kept.
func (t *TaskContract) pin(i int, c *verify.Check) error {
	if len(c.Pin) == 0 {
		if len(c.Pinned) > 0 {
			return configError(fmt.Sprintf("verification[%d].pinned", i), "pinned content without pin paths")
		}
		return nil
	}
	dir := t.Root
	if t.SingleFile() {
		dir = filepath.Dir(t.File)
	}
	if c.Pinned == nil {
		c.Pinned = map[string]string{}
	}
	total := 0
	for j, p := range c.Pin {
		field := fmt.Sprintf("verification[%d].pin[%d]", i, j)
		content, ok := c.Pinned[p]
		if !ok {
			root, err := os.OpenRoot(dir)
			if err != nil {
				return configError(field, "%v", err)
			}
			data, err := root.ReadFile(p)
			root.Close()
			if err != nil {
				return configError(field, "cannot read %s in the workspace: %v", p, err)
			}
			content = string(data)
			c.Pinned[p] = content
		}
		if total += len(content); total > maxPinned {
			return configError(field, "pinned files are over %d bytes in all", maxPinned)
		}
	}
	for p := range c.Pinned {
		if !slices.Contains(c.Pin, p) {
			return configError(fmt.Sprintf("verification[%d].pinned", i), "%s is pinned but not in pin", p)
		}
	}
	return nil
}

// compactJSON is raw without insignificant space, or raw itself.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
