package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The CLI only parses: its tables are plain values read by functions, never filled by an init()
// (whose order follows the file names), and no command tree lives in a package variable.
func TestNoInitInTheCLI(t *testing.T) {
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, obj := range f.Scope.Objects {
			if name == "root" {
				t.Errorf("%s: package-level %s %q: build the command tree in newRoot()", e.Name(), obj.Kind, name)
			}
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s:%d: func init(): read the table through a function instead", e.Name(), fs.Position(fn.Pos()).Line)
			}
		}
	}
}
