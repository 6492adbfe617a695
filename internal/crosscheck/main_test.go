package main

import (
	"strings"
	"testing"
)

// The fixture module type-checks on Linux and breaks on Windows twice: a
// shared file calls what only Linux declares, and a Windows-only file
// imports what it does not use.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		goos string
		want []string
	}{
		{"linux", nil},
		{"windows", []string{"shared.go:5:28: undefined: onlyLinux", `sub_windows.go:4:8: "os" imported and not used`}},
	} {
		errs, n, err := check("testdata/mod", tc.goos, "amd64", []string{"./..."})
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 || len(errs) != len(tc.want) {
			t.Fatalf("%s: %d packages, errors %q; want 2 and %q", tc.goos, n, errs, tc.want)
		}
		for i, w := range tc.want {
			if !strings.HasSuffix(errs[i], w) {
				t.Errorf("%s: error %q, want one ending %q", tc.goos, errs[i], w)
			}
		}
	}
}
