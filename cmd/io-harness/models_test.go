package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModels(t *testing.T) {
	dir := t.TempDir()
	override := filepath.Join(dir, "models.json")
	os.WriteFile(override, []byte(`{"version": 1, "models": [
		{"vendor": "anthropic", "id": "claude-sonnet-4-5", "context_window": 100000, "max_output_tokens": 8000, "price": {"input": 1, "output": 2}, "tools": true},
		{"vendor": "openai_compatible", "id": "team/llama", "context_window": 131072, "price": {"input": 0.5, "output": 0.5}, "tools": true}]}`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "models": [{"vendor": "openai", "id": "x", "price": {"inptu": 1, "output": 2}}]}`), 0o600)

	// The text table: every column of a known row, and the footer.
	r := cli(t, dir, "", "models")
	if r.code != exitOK {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{
		"VENDOR", "CONTEXT", "LONG CONTEXT",
		"anthropic   claude-sonnet-4-5", "200,000", "64,000",
		"openai      gpt-5.4 ", ">272,000: 5/22.5",
		"openrouter  qwen/qwen3-coder", "local       qwen2.5-coder",
		"Prices in US dollars per million tokens", "Catalogue as of 20",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("models lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "team/llama") {
		t.Errorf("an override was applied without being asked for")
	}

	// JSON, with the override from the environment, as a run sees it.
	t.Setenv("IO_HARNESS_MODELS", override)
	r = cli(t, dir, "", "prices", "--json", "--vendor", "anthropic")
	var res struct {
		Override string `json:"override"`
		AsOf     string `json:"as_of"`
		Models   []struct {
			Vendor          string `json:"vendor"`
			ID              string `json:"id"`
			ContextWindow   int64  `json:"context_window"`
			MaxOutputTokens int64  `json:"max_output_tokens"`
			Price           *struct {
				Input  float64 `json:"input"`
				Output float64 `json:"output"`
			} `json:"price"`
		} `json:"models"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("%s", r)
	}
	if res.Override != override || res.AsOf == "" || len(res.Models) == 0 {
		t.Errorf("override %q, as_of %q, %d models", res.Override, res.AsOf, len(res.Models))
	}
	found := false
	for _, m := range res.Models {
		if m.Vendor != "anthropic" {
			t.Errorf("--vendor anthropic listed %s %s", m.Vendor, m.ID)
		}
		if m.ID == "claude-sonnet-4-5" {
			found = true
			if m.ContextWindow != 100000 || m.Price == nil || m.Price.Input != 1 {
				t.Errorf("the override's entry is not the one listed: %+v", m)
			}
		}
	}
	if !found {
		t.Error("claude-sonnet-4-5 is not listed")
	}
	// --file wins over the environment.
	r = cli(t, dir, "", "models", "--file", bad)
	if r.code != exitError || !strings.Contains(r.stderr, "models[0].price.inptu: unknown field") || !strings.Contains(r.stderr, bad) {
		t.Errorf("bad override: %s", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"models", "--help"}, exitOK, "Usage: io-harness models"},
		{[]string{"models", "extra"}, exitUsage, "models takes no arguments"},
		{[]string{"help"}, exitOK, "list the model catalogue"},
	} {
		r := cli(t, dir, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Errorf("%v: want exit %d and %q; got %s", tc.args, tc.code, tc.want, r)
		}
	}
}
