package abi

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the fixtures' events.golden files from this run")

// Every fixture produces exactly its golden sequence of event kinds: the
// same files drive the C, Python and Node tests.
func TestFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			a := New(nil)
			got := f.play(t, a)
			if *update {
				writeGolden(t, f.golden, got)
			}
			want := readGolden(t, f.golden)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event kinds (-golden +got):\n%s", diff)
			}
			// Twice more: the sequence must not depend on timing.
			for i := 0; i < 2; i++ {
				if diff := cmp.Diff(want, f.play(t, a)); diff != "" {
					t.Errorf("replay %d differs (-golden +got):\n%s", i, diff)
				}
			}
		})
	}
}
