package abi

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

// ModelList is the result of models.list: the model catalogue as a run
// would see it.
type ModelList struct {
	// AsOf and Sources are the built-in catalogue's.
	AsOf    string   `json:"as_of"`
	Sources []string `json:"sources"`
	// Override is the override file merged in, or "".
	Override string `json:"override"`
	// Models are the entries, by vendor then id.
	Models []models.Model `json:"models"`
}

// modelsList answers models.list: params file (an override file, as a
// spec's "models") and use_environment (read IO_HARNESS_MODELS when file
// is empty, with the host's environment lookup).
func (a *ABI) modelsList(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		File           string `json:"file"`
		UseEnvironment bool   `json:"use_environment"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	var lookup func(string) (string, bool)
	if p.UseEnvironment {
		lookup = a.opts.LookupEnv
	}
	spec := harness.Spec{Models: p.File}
	cat, err := spec.Catalogue(lookup)
	if err != nil {
		return nil, err
	}
	out := &ModelList{AsOf: cat.AsOf, Sources: cat.Sources, Override: cat.File, Models: cat.Models}
	slices.SortStableFunc(out.Models, func(x, y models.Model) int {
		return cmp.Or(cmp.Compare(x.Vendor, y.Vendor), cmp.Compare(x.ID, y.ID))
	})
	return out, nil
}
