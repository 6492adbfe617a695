// Command nocgo is a test fixture: a program built with CGO_ENABLED=0
// that picks a sandbox and prints, as JSON, which backend and spawner it
// got and what was skipped.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func main() {
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(struct {
		Backend string              `json:"backend"`
		Enf     sandbox.Enforcement `json:"enforced"`
	}{sb.Name(), sb.Enforcement()})
}
