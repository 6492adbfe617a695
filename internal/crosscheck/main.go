// Command crosscheck type-checks the module's packages for other
// platforms without compiling them: every package of the module, as each
// platform's build constraints select its files, against the API of its
// dependencies as that platform sees them. A file that only builds
// somewhere, or a platform-independent file that uses a name only one
// platform declares, is an error here, at a fraction of the cost of a
// cross-build (which compiles every dependency, SQLite included, once per
// platform).
//
//	go run ./internal/crosscheck -platforms 'linux/arm64 windows/amd64' ./pkg/... ./cmd/...
//
// Dependencies outside the module are checked without their function
// bodies, and their own errors are not reported: only the module's code
// is judged. cgo is off, as the pure-Go build is the one claimed for
// every platform.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	platforms := flag.String("platforms", "", "the GOOS/GOARCH pairs to check, separated by spaces")
	flag.Parse()
	patterns := flag.Args()
	if *platforms == "" || len(patterns) == 0 {
		fmt.Fprintln(os.Stderr, "usage: crosscheck -platforms 'GOOS/GOARCH …' PACKAGES…")
		os.Exit(2)
	}
	bad := false
	for _, p := range strings.Fields(*platforms) {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			fmt.Fprintf(os.Stderr, "crosscheck: %q is not GOOS/GOARCH\n", p)
			os.Exit(2)
		}
		errs, n, err := check(".", goos, goarch, patterns)
		if err != nil {
			fmt.Fprintf(os.Stderr, "crosscheck: %s: %v\n", p, err)
			os.Exit(2)
		}
		for _, e := range errs {
			fmt.Printf("%s: %s\n", p, e)
		}
		if len(errs) > 0 {
			bad = true
			fmt.Printf("   %s: %d errors in %d packages\n", p, len(errs), n)
		} else {
			fmt.Printf("   %s: %d packages type-check\n", p, n)
		}
	}
	if bad {
		os.Exit(1)
	}
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
	ImportMap  map[string]string
	Module     *struct{ Main bool }
	Standard   bool
	Error      *struct{ Err string }
}

// check type-checks the packages patterns name in the module at dir, for
// goos/goarch, and returns the errors found in the module's own packages
// and how many of them were checked.
func check(dir, goos, goarch string, patterns []string) ([]string, int, error) {
	pkgs, err := list(dir, goos, goarch, patterns)
	if err != nil {
		return nil, 0, err
	}
	fset := token.NewFileSet()
	done := map[string]*types.Package{"unsafe": types.Unsafe}
	var errs []string
	n := 0
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		mine := p.Module != nil && p.Module.Main
		if p.Error != nil {
			if mine {
				errs = append(errs, fmt.Sprintf("%s: %s", p.ImportPath, p.Error.Err))
			}
			continue
		}
		var files []*ast.File
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
			if err != nil {
				if mine {
					errs = append(errs, err.Error())
				}
				continue
			}
			files = append(files, af)
		}
		conf := types.Config{
			Importer:         importerFunc(func(path string) (*types.Package, error) { return lookup(done, p.ImportMap, path) }),
			Sizes:            types.SizesFor("gc", goarch),
			IgnoreFuncBodies: !mine,
			FakeImportC:      true,
			Error: func(err error) {
				if mine {
					errs = append(errs, err.Error())
				}
			},
		}
		tp, _ := conf.Check(p.ImportPath, fset, files, nil)
		done[p.ImportPath] = tp
		if mine {
			n++
		}
	}
	return errs, n, nil
}

// lookup finds an import already checked, through the importing
// package's vendor map.
func lookup(done map[string]*types.Package, m map[string]string, path string) (*types.Package, error) {
	if v, ok := m[path]; ok {
		path = v
	}
	if tp := done[path]; tp != nil {
		return tp, nil
	}
	return nil, fmt.Errorf("%s was not checked before its importer", path)
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// list runs go list -deps for the platform: every package the patterns
// need, dependencies first.
func list(dir, goos, goarch string, patterns []string) ([]pkg, error) {
	args := append([]string{"list", "-e", "-deps", "-json=ImportPath,Dir,Name,GoFiles,ImportMap,Module,Standard,Error"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
