// Package models is the model catalogue: for each model people drive the
// harness with, its context window, the largest output cap it accepts, its
// list price and whether it takes tool calls and images.
//
// The catalogue is a JSON document embedded in the module
// ([Builtin]); an override file in the same format ([Load]) replaces or
// adds entries ([Catalogue.Merge]). The vendor packages look their model
// up in it ([Catalogue.Lookup]) to price a turn, to size the output cap of
// a request, and to report the model's limits ([provider.Limiter]).
//
// A catalogue is plain data: reading it reads no environment and no file
// but the one it is asked to load.
package models

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Version is the catalogue format this package reads. A catalogue of
// another version is refused.
const Version = 1

// The vendors a catalogue entry belongs to. An entry applies only to
// clients of its vendor: the same model costs differently through
// different vendors.
const (
	// VendorAnthropic is Anthropic's Messages API.
	VendorAnthropic = "anthropic"
	// VendorOpenAI is OpenAI's API.
	VendorOpenAI = "openai"
	// VendorOpenRouter is OpenRouter. An "openai/…" or "anthropic/…" id
	// the catalogue does not list for OpenRouter has the entry of that
	// vendor's model (OpenRouter bills the vendor's list price), and a
	// ":free" variant has its model's limits and a zero price.
	VendorOpenRouter = "openrouter"
	// VendorLocal is a server on the user's machine (Ollama, vLLM,
	// llama.cpp, LM Studio): an OpenAI-compatible client with a preset
	// or a loopback base URL. Its models cost nothing.
	VendorLocal = "local"
	// VendorCompatible is any other OpenAI-compatible server. The
	// built-in catalogue lists none: a hosted gateway bills by its own
	// price list, which an override file can give.
	VendorCompatible = "openai_compatible"
)

// Vendors returns the vendors an entry may name.
func Vendors() []string {
	return []string{VendorAnthropic, VendorOpenAI, VendorOpenRouter, VendorLocal, VendorCompatible}
}

// Model is what the catalogue knows of one model.
type Model struct {
	// Vendor is the API the entry applies to (VendorAnthropic, …).
	Vendor string `json:"vendor"`
	// ID is the model id as the vendor's API takes it, without a
	// snapshot date: "claude-sonnet-4-5" also covers
	// "claude-sonnet-4-5-20250929".
	ID string `json:"id"`
	// Aliases are other ids of the same model.
	Aliases []string `json:"aliases,omitempty"`
	// Limits are the context window and the largest output cap; zero
	// means unknown.
	provider.Limits
	// Price is the list price per million tokens; nil means unknown.
	Price *provider.Price `json:"price,omitempty"`
	// Tools reports whether the model takes tool calls; the harness
	// works only through tools.
	Tools bool `json:"tools"`
	// Images reports whether the model takes images as input.
	Images bool `json:"images"`
	// Note says anything a reader of the entry should know.
	Note string `json:"note,omitempty"`
}

// Catalogue is a set of models: the built-in one, an override file, or
// the two merged.
type Catalogue struct {
	// Version is the format, [Version].
	Version int `json:"version"`
	// AsOf is the date (YYYY-MM-DD) the figures were last checked.
	AsOf string `json:"as_of,omitempty"`
	// Sources say where the figures come from.
	Sources []string `json:"sources,omitempty"`
	// Models are the entries. A vendor's id or alias names one entry.
	Models []Model `json:"models"`
	// File is the override file the catalogue was loaded from, or the
	// file of the override merged into it; it is not part of the JSON.
	File string `json:"-"`
}

// Error is a catalogue that cannot be used: a file that cannot be read,
// or a document that is not a valid catalogue.
type Error struct {
	// File is the file, or "" for data that came from no file.
	File string
	// Field is the JSON path of the offending value in the document,
	// such as "models[3].price.input"; "" for the document as a whole.
	Field string
	// Message describes the problem.
	Message string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	s := "model catalogue"
	if e.File != "" {
		s += " " + e.File
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

//go:embed models.json
var builtin []byte

// Builtin returns the catalogue embedded in the module. Each call returns
// a fresh copy, which the caller may change. It panics if the embedded
// document is invalid, which a test of this package rules out.
func Builtin() *Catalogue {
	c, err := Parse(builtin)
	if err != nil {
		panic("models: the embedded catalogue is invalid: " + err.Error())
	}
	return c
}

// MaxFileSize bounds an override file.
const MaxFileSize = 4 << 20

// Load reads an override file: a regular file of at most MaxFileSize
// bytes. Its errors are *Error naming the file.
func Load(path string) (*Catalogue, error) {
	// A FIFO or a device would block the open or never end; only a
	// regular file is read.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, &Error{File: path, Message: "cannot be read: not a regular file"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Message: "cannot be read", Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Message: "cannot be read", Err: err}
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: path, Message: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	c, err := Parse(data)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.File = path
		}
		return nil, err
	}
	c.File = path
	return c, nil
}

// Parse reads a catalogue document and checks it. Unknown fields are
// errors, so that a misspelt field is never silently ignored. Its errors
// are *Error naming the offending field.
func Parse(data []byte) (*Catalogue, error) {
	var doc struct {
		Version *int              `json:"version"`
		AsOf    string            `json:"as_of"`
		Sources []string          `json:"sources"`
		Models  []json.RawMessage `json:"models"`
	}
	if err := strict(data, &doc); err != nil {
		return nil, jsonError("", err)
	}
	c := &Catalogue{AsOf: doc.AsOf, Sources: doc.Sources}
	switch {
	case doc.Version == nil:
		return nil, &Error{Field: "version", Message: fmt.Sprintf("required; this build reads version %d", Version)}
	case *doc.Version != Version:
		return nil, &Error{Field: "version", Message: fmt.Sprintf("version %d; this build reads version %d", *doc.Version, Version)}
	}
	c.Version = *doc.Version
	if c.AsOf != "" {
		if _, err := time.Parse(time.DateOnly, c.AsOf); err != nil {
			return nil, &Error{Field: "as_of", Message: fmt.Sprintf("%q is not a date such as 2026-07-24", c.AsOf)}
		}
	}
	names := map[string]string{} // vendor + "\x00" + lower-case name → where it was first seen
	for i, raw := range doc.Models {
		field := fmt.Sprintf("models[%d]", i)
		m, err := parseModel(raw, field)
		if err != nil {
			return nil, err
		}
		for j, name := range append([]string{m.ID}, m.Aliases...) {
			at := field + ".id"
			if j > 0 {
				at = fmt.Sprintf("%s.aliases[%d]", field, j-1)
			}
			key := m.Vendor + "\x00" + strings.ToLower(name)
			if first, dup := names[key]; dup {
				return nil, &Error{Field: at, Message: fmt.Sprintf("%s model %q is already named at %s", m.Vendor, name, first)}
			}
			names[key] = at
		}
		c.Models = append(c.Models, m)
	}
	return c, nil
}

// parseModel reads and checks one entry.
func parseModel(raw json.RawMessage, field string) (Model, error) {
	var e struct {
		Vendor          string          `json:"vendor"`
		ID              string          `json:"id"`
		Aliases         []string        `json:"aliases"`
		ContextWindow   int64           `json:"context_window"`
		MaxOutputTokens int64           `json:"max_output_tokens"`
		Price           json.RawMessage `json:"price"`
		Tools           bool            `json:"tools"`
		Images          bool            `json:"images"`
		Note            string          `json:"note"`
	}
	if err := strict(raw, &e); err != nil {
		return Model{}, jsonError(field, err)
	}
	m := Model{Vendor: e.Vendor, ID: e.ID, Aliases: e.Aliases, Tools: e.Tools, Images: e.Images, Note: e.Note,
		Limits: provider.Limits{ContextWindow: e.ContextWindow, MaxOutputTokens: e.MaxOutputTokens}}
	switch {
	case m.Vendor == "":
		return Model{}, &Error{Field: field + ".vendor", Message: "required; one of " + strings.Join(Vendors(), ", ")}
	case !slices.Contains(Vendors(), m.Vendor):
		return Model{}, &Error{Field: field + ".vendor", Message: fmt.Sprintf("unknown vendor %q; want one of %s", m.Vendor, strings.Join(Vendors(), ", "))}
	}
	if err := checkName(m.ID, field+".id"); err != nil {
		return Model{}, err
	}
	for j, a := range m.Aliases {
		if err := checkName(a, fmt.Sprintf("%s.aliases[%d]", field, j)); err != nil {
			return Model{}, err
		}
	}
	switch {
	case m.ContextWindow < 0:
		return Model{}, &Error{Field: field + ".context_window", Message: "must not be negative"}
	case m.MaxOutputTokens < 0:
		return Model{}, &Error{Field: field + ".max_output_tokens", Message: "must not be negative"}
	case m.ContextWindow > 0 && m.MaxOutputTokens > m.ContextWindow:
		return Model{}, &Error{Field: field + ".max_output_tokens", Message: fmt.Sprintf("%d is more than the context window of %d", m.MaxOutputTokens, m.ContextWindow)}
	}
	if p := bytes.TrimSpace(e.Price); len(p) > 0 && string(p) != "null" {
		price, err := parsePrice(p, field+".price")
		if err != nil {
			return Model{}, err
		}
		m.Price = &price
	}
	return m, nil
}

// checkName checks a model id or alias.
func checkName(name, field string) error {
	switch {
	case name == "":
		return &Error{Field: field, Message: "required"}
	case len(name) > 256:
		return &Error{Field: field, Message: "longer than 256 bytes"}
	case strings.TrimSpace(name) != name || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return &Error{Field: field, Message: fmt.Sprintf("%q has surrounding space or a control character", name)}
	}
	return nil
}

// parsePrice reads and checks a price object.
func parsePrice(raw []byte, field string) (provider.Price, error) {
	var p struct {
		Input       *float64        `json:"input"`
		Output      *float64        `json:"output"`
		CacheRead   float64         `json:"cache_read"`
		CacheWrite  float64         `json:"cache_write"`
		LongContext json.RawMessage `json:"long_context"`
	}
	if err := strict(raw, &p); err != nil {
		return provider.Price{}, jsonError(field, err)
	}
	switch {
	case p.Input == nil:
		return provider.Price{}, &Error{Field: field + ".input", Message: "required (dollars per million input tokens; 0 for a free model)"}
	case p.Output == nil:
		return provider.Price{}, &Error{Field: field + ".output", Message: "required (dollars per million output tokens; 0 for a free model)"}
	}
	price := provider.Price{Input: *p.Input, Output: *p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", price.Input}, {"output", price.Output}, {"cache_read", price.CacheRead}, {"cache_write", price.CacheWrite}} {
		if f.v < 0 {
			return provider.Price{}, &Error{Field: field + "." + f.name, Message: "must not be negative"}
		}
	}
	if lc := bytes.TrimSpace(p.LongContext); len(lc) > 0 && string(lc) != "null" {
		var l provider.LongContextPrice
		if err := strict(lc, &l); err != nil {
			return provider.Price{}, jsonError(field+".long_context", err)
		}
		lf := field + ".long_context"
		switch {
		case l.AboveInputTokens <= 0:
			return provider.Price{}, &Error{Field: lf + ".above_input_tokens", Message: "required, and positive"}
		case l.Input < 0 || l.Output < 0 || l.CacheRead < 0 || l.CacheWrite < 0:
			return provider.Price{}, &Error{Field: lf, Message: "a price must not be negative"}
		}
		price.LongContext = &l
	}
	return price, nil
}

// strict decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// jsonError turns a decoding error of the object at field into an
// *Error naming the field at fault.
func jsonError(field string, err error) *Error {
	join := func(f string) string {
		switch {
		case field == "":
			return f
		case f == "":
			return field
		}
		return field + "." + f
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return &Error{Field: join(te.Field), Message: fmt.Sprintf("want %s, got JSON %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return &Error{Field: field, Message: fmt.Sprintf("invalid JSON at byte %d", se.Offset), Err: err}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Field: field, Message: "truncated JSON"}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &Error{Field: join(strings.Trim(f, `"`)), Message: "unknown field"}
	}
	return &Error{Field: field, Message: strings.TrimPrefix(err.Error(), "json: ")}
}

// Merge returns a catalogue with the entries of c and of o: an entry of o
// replaces, whole, every entry of c of its vendor that one of its names
// (id or alias, with or without a snapshot date) names, and is added
// otherwise. c and o are not changed; a nil o returns
// a copy of c.
func (c *Catalogue) Merge(o *Catalogue) *Catalogue {
	out := c.clone()
	if o == nil {
		return out
	}
	for _, m := range o.Models {
		out.Models = slices.DeleteFunc(out.Models, func(old Model) bool {
			if old.Vendor != m.Vendor {
				return false
			}
			for _, n := range m.names() {
				if old.named(n) || old.named(undated(n)) {
					return true
				}
			}
			return false
		})
	}
	out.Models = append(out.Models, o.clone().Models...)
	if o.File != "" {
		out.File = o.File
	}
	return out
}

// clone returns a deep copy of c.
func (c *Catalogue) clone() *Catalogue {
	out := *c
	out.Sources = slices.Clone(c.Sources)
	out.Models = make([]Model, len(c.Models))
	for i, m := range c.Models {
		out.Models[i] = m.clone()
	}
	return &out
}

func (m Model) clone() Model {
	m.Aliases = slices.Clone(m.Aliases)
	if m.Price != nil {
		p := *m.Price
		if p.LongContext != nil {
			lc := *p.LongContext
			p.LongContext = &lc
		}
		m.Price = &p
	}
	return m
}

// names returns the entry's id and aliases.
func (m *Model) names() []string { return append([]string{m.ID}, m.Aliases...) }

// named reports whether id or an alias of m is name, ignoring case and
// the snapshot date of m's names: an entry for "x-20250929" is the
// catalogue's "x".
func (m *Model) named(name string) bool {
	if name == "" {
		return false
	}
	for _, n := range m.names() {
		if strings.EqualFold(n, name) || strings.EqualFold(undated(n), name) {
			return true
		}
	}
	return false
}

// Lookup returns the entry of model for vendor, a copy. A dated snapshot
// ("gpt-4o-2024-08-06", "claude-haiku-4-5-20251001") has its base model's
// entry, and names are compared ignoring case. For VendorOpenRouter an
// unlisted "openai/…" or "anthropic/…" id has the entry of that vendor's
// model (OpenRouter writes Anthropic versions with dots, "claude-opus-4.7",
// where the API uses dashes), and a ":free" variant has its model's
// limits and a zero price; other variants (":nitro", …) are priced by
// OpenRouter alone and are not found. For VendorLocal an Ollama tag
// ("qwen2.5-coder:7b-instruct-q8_0") has its model's entry, and so has a
// Hugging Face id ("Qwen/Qwen3-Coder-30B-A3B-Instruct") whose last
// segment an entry names. ok is false when the catalogue does not know the
// model.
func (c *Catalogue) Lookup(vendor, model string) (m Model, ok bool) {
	if m, ok := c.find(vendor, model); ok {
		return m, true
	}
	switch vendor {
	case VendorOpenRouter:
		base, variant, hasVariant := strings.Cut(model, ":")
		if hasVariant {
			if variant != "free" {
				return Model{}, false
			}
			m, ok := c.Lookup(vendor, base)
			if ok {
				m.Price = &provider.Price{}
				m.Note = "OpenRouter's free variant"
			}
			return m, ok
		}
		upstream, id, ok := strings.Cut(model, "/")
		if !ok {
			return Model{}, false
		}
		switch upstream {
		case VendorOpenAI:
			return c.find(VendorOpenAI, id)
		case VendorAnthropic:
			return c.find(VendorAnthropic, strings.ReplaceAll(id, ".", "-"))
		}
	case VendorLocal:
		name := model
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		if base, _, ok := strings.Cut(name, ":"); ok {
			name = base
		}
		if name != model && name != "" {
			return c.find(vendor, name)
		}
	}
	return Model{}, false
}

// find looks model up among vendor's entries: by name, then without a
// snapshot date.
func (c *Catalogue) find(vendor, model string) (Model, bool) {
	for _, name := range []string{model, undated(model)} {
		if name == "" {
			continue
		}
		for i := len(c.Models) - 1; i >= 0; i-- { // a later entry (an override) wins
			m := &c.Models[i]
			if m.Vendor == vendor && m.named(name) {
				return m.clone(), true
			}
		}
	}
	return Model{}, false
}

// undated returns model without its snapshot date ("-20250929" or
// "-2024-08-06"), or "" when it has none.
func undated(model string) string {
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	n := len(model)
	switch {
	case n > 9 && model[n-9] == '-' && digits(model[n-8:]):
		return model[:n-9]
	case n > 11 && model[n-11] == '-' && digits(model[n-10:n-6]) && model[n-6] == '-' && digits(model[n-5:n-3]) && model[n-3] == '-' && digits(model[n-2:]):
		return model[:n-11]
	}
	return ""
}
