// Package pricetable looks a model up in a vendor's embedded list-price
// table.
package pricetable

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Table is the JSON shape of a price table: model id to price, per
// million tokens in US dollars.
type Table struct {
	// Models maps a model id, without a date suffix, to its price.
	Models map[string]provider.Price `json:"models"`
}

// Lookup reads the table in file name of fsys and returns the price of
// model. A dated snapshot ("gpt-4o-2024-08-06",
// "claude-haiku-4-5-20251001") has its base model's price. ok is false
// when the model is not in the table; err is not nil when the table does
// not parse, which a test of each vendor package rules out.
func Lookup(fsys fs.FS, name, model string) (p provider.Price, ok bool, err error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return provider.Price{}, false, fmt.Errorf("price table: %w", err)
	}
	var t Table
	if err := json.Unmarshal(data, &t); err != nil {
		return provider.Price{}, false, fmt.Errorf("price table %s: %w", name, err)
	}
	if p, ok := t.Models[model]; ok {
		return p, true, nil
	}
	if m := dated().FindStringSubmatch(model); m != nil {
		p, ok := t.Models[m[1]]
		return p, ok, nil
	}
	return provider.Price{}, false, nil
}

// dated matches a model id that ends in a snapshot date.
func dated() *regexp.Regexp {
	return regexp.MustCompile(`^(.+)-(?:\d{4}-\d{2}-\d{2}|\d{8})$`)
}
