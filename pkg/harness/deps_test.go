package harness_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/initorigin/io-harness-go"

// allowedImporters says which packages may import each heavy dependency
// directly: every dependency lives in one place, so that it can be
// replaced there, and so that importing one part of the library does not
// drag in the others' dependencies.
var allowedImporters = map[string][]string{
	"modernc.org/":                          {module + "/pkg/harness/store/sqlite"},
	"github.com/jackc/pgx":                  {module + "/pkg/harness/store/postgres", module + "/pkg/harness/fleet", module + "/internal/pgtest"},
	"github.com/riverqueue/river":           {module + "/pkg/harness/fleet"},
	"github.com/santhosh-tekuri/jsonschema": {module + "/pkg/harness/verify"},
	"github.com/bmatcuk/doublestar":         {module + "/pkg/harness/tool", module + "/pkg/harness/policy"},
	"github.com/tetratelabs/wazero":         {module + "/pkg/sandbox/wasi"},
	"github.com/mark3labs/mcp-go":           {module + "/pkg/harness/mcp"},
	"mvdan.cc/sh":                           {module + "/pkg/harness/policy"},
	"go.opentelemetry.io/":                  {module + "/pkg/harness/telemetry"},
	"google.golang.org/":                    {module + "/pkg/harness/telemetry"},
}

// fronts are the packages above the harness package: they drive runs
// through it, and no leaf imports them.
var fronts = []string{module + "/pkg/harness/fleet"}

// TestDependencyBoundaries fails when a package imports a dependency it
// should not, or when a leaf package imports the harness package (the
// import direction is harness → leaves).
func TestDependencyBoundaries(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot list the module's imports")
	}
	out, err := exec.Command(goBin, "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		checked++
		for _, imp := range imports {
			for dep, allowed := range allowedImporters {
				if strings.HasPrefix(imp, dep) && !slices.Contains(allowed, pkg) {
					t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
				}
			}
			if imp == module+"/pkg/harness" && strings.HasPrefix(pkg, module+"/pkg/") && !slices.Contains(fronts, pkg) {
				t.Errorf("%s imports the harness package; leaves must not", pkg)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("go list saw only %d packages", checked)
	}
}
