package pricetable_test

import (
	"testing"
	"testing/fstest"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/pricetable"
)

func TestLookup(t *testing.T) {
	fsys := fstest.MapFS{
		"p.json":   {Data: []byte(`{"models":{"gpt-4o":{"input":2.5,"output":10,"cache_read":1.25},"claude-haiku-4-5":{"input":1,"output":5}}}`)},
		"bad.json": {Data: []byte(`{"models":[`)},
	}
	tests := []struct {
		model string
		want  provider.Price
		ok    bool
	}{
		{"gpt-4o", provider.Price{Input: 2.5, Output: 10, CacheRead: 1.25}, true},
		{"gpt-4o-2024-08-06", provider.Price{Input: 2.5, Output: 10, CacheRead: 1.25}, true},
		{"claude-haiku-4-5-20251001", provider.Price{Input: 1, Output: 5}, true},
		{"gpt-4o-mini", provider.Price{}, false},
		{"gpt-4o-2024", provider.Price{}, false},
		{"", provider.Price{}, false},
	}
	for _, tt := range tests {
		got, ok, err := pricetable.Lookup(fsys, "p.json", tt.model)
		if err != nil || ok != tt.ok || got != tt.want {
			t.Errorf("Lookup(%q) = %+v, %v, %v; want %+v, %v", tt.model, got, ok, err, tt.want, tt.ok)
		}
	}
	if _, _, err := pricetable.Lookup(fsys, "bad.json", "x"); err == nil {
		t.Error("a broken table parsed")
	}
	if _, _, err := pricetable.Lookup(fsys, "missing.json", "x"); err == nil {
		t.Error("a missing table was found")
	}
}
