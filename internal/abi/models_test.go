package abi

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModelsList(t *testing.T) {
	dir := t.TempDir()
	override := filepath.Join(dir, "models.json")
	os.WriteFile(override, []byte(`{"version": 1, "models": [{"vendor": "openai_compatible", "id": "team/llama", "context_window": 131072, "price": {"input": 0.5, "output": 0.5}, "tools": true}]}`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "models": [{"vendor": "openai", "id": "x", "windw": 1}]}`), 0o600)

	find := func(res map[string]any, vendor, id string) map[string]any {
		for _, m := range res["models"].([]any) {
			mm := m.(map[string]any)
			if mm["vendor"] == vendor && mm["id"] == id {
				return mm
			}
		}
		return nil
	}
	a := New(&Options{LookupEnv: func(k string) (string, bool) {
		if k == "IO_HARNESS_MODELS" {
			return override, true
		}
		return "", false
	}})

	res := call(t, a, "models.list", nil)
	if res["as_of"] == "" || res["override"] != "" || find(res, "anthropic", "claude-sonnet-4-5") == nil || find(res, "openai_compatible", "team/llama") != nil {
		t.Errorf("built-in list: override %v, as_of %v", res["override"], res["as_of"])
	}
	if m := find(res, "openai", "gpt-4o"); m == nil || m["context_window"] != float64(128000) || m["max_output_tokens"] != float64(16384) ||
		m["price"].(map[string]any)["input"] != 2.5 || m["tools"] != true {
		t.Errorf("gpt-4o: %v", m)
	}
	// The environment is read only when asked.
	res = call(t, a, "models.list", map[string]any{"use_environment": true})
	if res["override"] != override || find(res, "openai_compatible", "team/llama") == nil {
		t.Errorf("IO_HARNESS_MODELS not applied: override %v", res["override"])
	}
	res = call(t, a, "models.list", map[string]any{"file": override})
	if find(res, "openai_compatible", "team/llama") == nil {
		t.Errorf("file not applied")
	}
	e := callErr(t, a, "models.list", map[string]any{"file": bad})
	if e.Code != CodeInvalidArgument || e.Details["field"] != "models" {
		t.Errorf("bad override: %+v", e)
	}
	if e := callErr(t, a, "models.list", map[string]any{"file": 5}); e.Code != CodeInvalidArgument {
		t.Errorf("bad params: %+v", e)
	}
}
