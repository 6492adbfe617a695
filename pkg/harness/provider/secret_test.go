package provider

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const key = "sk-live-0123456789"
	cfg := struct {
		Model  string
		APIKey Secret
	}{"m", key}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := fmt.Sprintf(f, cfg); strings.Contains(out, key) || strings.Contains(out, fmt.Sprintf("%x", key)) {
			t.Errorf("%s prints the key: %s", f, out)
		}
	}
	if b, _ := json.Marshal(cfg); strings.Contains(string(b), key) {
		t.Errorf("JSON holds the key: %s", b)
	}
	if cfg.APIKey.Reveal() != key {
		t.Error("Reveal does not return the key")
	}
	var back struct{ APIKey Secret }
	if err := json.Unmarshal([]byte(`{"APIKey":"`+key+`"}`), &back); err != nil || back.APIKey.Reveal() != key {
		t.Errorf("a key does not decode from JSON: %v", err)
	}
}
