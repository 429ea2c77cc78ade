package judge

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestReadBaselineDegrades(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := results.WriteJSON(good, summary(healthy())); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"truncated.json": `{"schema_version": "1.0", "hosts": [`,
		"empty.json":     ``,
		"future.json":    `{"schema_version": "9.0"}`,
		"other.json":     `{"hello": "world"}`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		s, note := ReadBaseline(p)
		if s != nil || !strings.HasPrefix(note, "no comparison: baseline "+p) {
			t.Errorf("%s: summary %v note %q", name, s != nil, note)
		}
	}
	if s, note := ReadBaseline(filepath.Join(dir, "absent.json")); s != nil || !strings.Contains(note, "no comparison") {
		t.Errorf("absent: %q", note)
	}
	if s, note := ReadBaseline(good); s == nil || note != "" {
		t.Errorf("good baseline: %q", note)
	}
}

func TestBaselineForInline(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "baseline.json")
	if err := results.WriteJSON(base, summary(healthy(), healthy())); err != nil {
		t.Fatal(err)
	}
	s := withEnv(summary(healthy(), healthy().scaled(0.25)), "k8s")
	cfg := DefaultConfig()
	BaselineFor(base, s, cfg)
	Apply(s, cfg)
	if s.Baseline == nil || s.Baseline.BaselineFile != base || s.Baseline.TolerancePctSrc != SourceDefault {
		t.Fatalf("baseline %+v", s.Baseline)
	}
	var buf bytes.Buffer
	if err := WriteBaselineTable(&buf, s.Baseline); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "FLAG Qwen/Qwen3-8B gpu 1 [k8s]") {
		t.Errorf("table:\n%s", buf.String())
	}
	// A corrupt baseline: a note, no flag, the run still judged.
	s2 := summary(healthy())
	BaselineFor(filepath.Join(dir, "missing.json"), s2, cfg)
	Apply(s2, cfg)
	if s2.Baseline == nil || !strings.HasPrefix(s2.Baseline.Note, "no comparison") || s2.Status != results.StatusOK {
		t.Errorf("missing baseline: %+v status %s", s2.Baseline, s2.Status)
	}
}

func TestReadResultNamesImports(t *testing.T) {
	path := filepath.Join("..", "importer", "testdata", "guidellm-sweep.json")
	s, err := ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Environment != path {
		t.Errorf("environment %q, want its path", s.Environment)
	}
}
