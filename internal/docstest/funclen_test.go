package docstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxFuncLines is the most lines, from its func keyword to its closing
// brace, a function of the job path's packages may have (docs/development.md).
const maxFuncLines = 80

// jobPathPackages are the packages the limit holds in.
var jobPathPackages = []string{"internal/runner", "internal/state", "internal/quota", "internal/consumer", "internal/worker"}

// TestJobPathFunctionsAreShort checks that no function of the job path's
// packages, tests included, is longer than maxFuncLines.
func TestJobPathFunctionsAreShort(t *testing.T) {
	checked := 0
	for _, pkg := range jobPathPackages {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				checked++
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines, over %d", filepath.ToSlash(mustRel(t, path)), fn.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("checked only %d functions; the scan is broken", checked)
	}
}
