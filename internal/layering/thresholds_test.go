package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Every threshold has one home (issue 53): its config key, its meta.thresholds key and a gate's
// check id are spelled in results/thresholds.go and nowhere else in the code that ships; every
// other file names them through the table. Comments and struct tags (the YAML and JSON field
// names a schema must spell) do not count.
func TestEachThresholdIsSpelledOnce(t *testing.T) {
	names := map[string]string{} // spelling -> the row it belongs to
	for _, th := range results.Thresholds {
		for _, n := range []string{th.Key, th.Summary, th.Check} { // a gate's name is also its figure's (ttft_p95_ms)
			if n != "" && strings.ContainsAny(n, "._") { // a dotted or underscored key, not a flag sentence
				names[n] = th.Key
			}
		}
	}
	for _, f := range shippedGoFiles(t) {
		if strings.HasSuffix(filepath.ToSlash(f), "internal/results/thresholds.go") {
			continue
		}
		for _, hit := range spellings(t, f, names) {
			t.Errorf("%s spells threshold %s; name it through results.Thresholds", hit, names[strings.SplitN(hit, " ", 2)[1]])
		}
	}
}

// A planted spelling is caught: the check above can fail.
func TestPlantedThresholdSpellingIsCaught(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.go")
	src := "package x\n\ntype T struct {\n\tA float64 `yaml:\"ttft_p95_ms\"`\n}\n\n// gates.ttft_p95_ms in a comment\nvar k = \"gates.ttft_p95_ms\"\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := spellings(t, f, map[string]string{results.ThTTFTP95Ms: results.ThTTFTP95Ms})
	if len(got) != 1 || !strings.HasSuffix(got[0], " "+results.ThTTFTP95Ms) {
		t.Errorf("want the one string literal caught (not the tag, not the comment), got %v", got)
	}
}

// spellings lists "file:line name" for each string literal of f (struct tags left out) that is one
// of names.
func spellings(t *testing.T, f string, names map[string]string) []string {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	tags := map[*ast.BasicLit]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
			tags[fl.Tag] = true
		}
		return true
	})
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING || tags[lit] {
			return true
		}
		if v, err := strconv.Unquote(lit.Value); err == nil {
			if _, hit := names[v]; hit {
				out = append(out, fset.Position(lit.Pos()).String()+" "+v)
			}
		}
		return true
	})
	return out
}

// shippedGoFiles are the module's non-test Go files under cmd and internal.
func shippedGoFiles(t *testing.T) []string {
	var out []string
	for _, root := range []string{"../../cmd", "../../internal"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "third_party") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
