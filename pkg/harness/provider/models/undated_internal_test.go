package models

import "testing"

func TestUndated(t *testing.T) {
	for in, want := range map[string]string{
		"claude-haiku-4-5-20251001": "claude-haiku-4-5",
		"gpt-4o-2024-08-06":         "gpt-4o",
		"x-20250101":                "x",
		"-20250101":                 "",
		"-2024-08-06":               "",
		"gpt-4o-2024-08":            "",
		"gpt-4o-2024-08-0x":         "",
		"claude-sonnet-4-5":         "",
		"m-2025010":                 "",
		"m_20250101":                "",
		"":                          "",
	} {
		if got := undated(in); got != want {
			t.Errorf("undated(%q) = %q, want %q", in, got, want)
		}
	}
}
