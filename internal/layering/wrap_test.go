package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mayBeNil are the errors the code formats with %v on purpose: each may be nil where it is
// formatted, and %w prints a nil as "%!w(<nil>)". "file: expression" (the file's path from the
// module root).
var mayBeNil = map[string]string{
	"internal/k8s/kwokplayer/player.go: err": "the context may end before the retry loop's first try",
}

// errVar is how the code names an error it formats: err, werr, runErr, x.err, ctx.Err().
var errVar = regexp.MustCompile(`(^|\.)([a-z]*[eE]rr|Err\(\))$`)

// An error formatted into another error wraps it (%w), so that a caller's errors.Is and errors.As
// (context.Canceled, os.ErrNotExist, a backend's sentinel) see through every layer (issue 53);
// the exceptions are in mayBeNil, each with why.
func TestErrorsWrapTheirCause(t *testing.T) {
	used := map[string]bool{}
	for _, f := range shippedGoFiles(t) {
		for _, hit := range flattenedErrors(t, f) {
			if _, ok := mayBeNil[hit.key]; !ok {
				t.Errorf("%s formats error %s with %%v: wrap it with %%w (or, where it may be nil, list it in mayBeNil with why)", hit.at, hit.expr)
			}
			used[hit.key] = true
		}
	}
	for k := range mayBeNil {
		if !used[k] {
			t.Errorf("mayBeNil lists %q, which no longer formats with %%v: drop it", k)
		}
	}
}

// A planted %v of an error is caught, and a %w, a non-error and a %v of err.Error() are not.
func TestPlantedFlattenedErrorIsCaught(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.go")
	src := `package x

import "fmt"

func f(err error, n int, ctx interface{ Err() error }) []error {
	return []error{
		fmt.Errorf("a %d: %v", n, err),
		fmt.Errorf("b: %w", err),
		fmt.Errorf("c %v", n),
		fmt.Errorf("d %s", err.Error()),
		fmt.Errorf("e %%v %v", ctx.Err()),
	}
}
`
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range flattenedErrors(t, f) {
		got = append(got, h.expr)
	}
	if strings.Join(got, " ") != "err ctx.Err()" {
		t.Errorf("caught %q, want the two %%v of an error (err, ctx.Err())", got)
	}
}

type flattened struct{ at, expr, key string }

// flattenedErrors lists f's fmt.Errorf calls that format an error-named argument with %v.
func flattenedErrors(t *testing.T, f string) []flattened {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(filepath.ToSlash(f), "../../")
	var out []flattened
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isFmtErrorf(call) || len(call.Args) < 2 {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		format, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for i, verb := range verbs(format) {
			if verb != 'v' || i+1 >= len(call.Args) {
				continue
			}
			expr := exprString(call.Args[i+1])
			if errVar.MatchString(expr) {
				out = append(out, flattened{at: fset.Position(call.Pos()).String(), expr: expr, key: rel + ": " + expr})
			}
		}
		return true
	})
	return out
}

func isFmtErrorf(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Errorf" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "fmt"
}

// verbs is the verb of each argument a format consumes, in order (nil for a format with an
// explicit index or a * width, which this check leaves alone).
func verbs(format string) []byte {
	var out []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			break
		}
		switch format[j] {
		case '%':
		case '[', '*':
			return nil
		default:
			out = append(out, format[j])
		}
		i = j
	}
	return out
}

// exprString spells the identifiers, selectors and argument-free calls an error is named by.
func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		if len(x.Args) == 0 {
			return exprString(x.Fun) + "()"
		}
	}
	return ""
}
