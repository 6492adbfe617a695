package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// README.md's exit codes are the CLI's (exitTable), every one of them,
// and its list of outcomes has every outcome kind of the schema.
func TestReadmeListsEveryExitCodeAndOutcome(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	para := func(start string) string {
		i := strings.Index(readme, start)
		if i < 0 {
			t.Fatalf("README.md has no %q", start)
		}
		end := strings.Index(readme[i:], "\n\n")
		return strings.Join(strings.Fields(readme[i:i+end]), " ")
	}
	codes := para("Exit codes:")
	for _, m := range regexp.MustCompile(`(?m)^  (\d+)\s+(\S+?):`).FindAllStringSubmatch(exitTable, -1) {
		if !regexp.MustCompile(`\b` + m[1] + ` `).MatchString(codes) {
			t.Errorf("README.md's exit codes lack %s (%s): %q", m[1], m[2], codes)
		}
	}
	schema, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Enum []string `json:"enum"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(schema, &doc); err != nil {
		t.Fatal(err)
	}
	kinds := doc.Defs["OutcomeKind"].Enum
	if len(kinds) < 10 {
		t.Fatalf("the schema's outcome kinds: %v", kinds)
	}
	outcomes := para("**Outcomes**")
	for _, k := range kinds {
		if !strings.Contains(outcomes, "`"+k+"`") {
			t.Errorf("README.md's outcomes lack %s: %q", k, outcomes)
		}
	}
}
