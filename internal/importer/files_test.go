package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestReadBaselineDegrades(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := results.WriteJSON(good, &results.Summary{SchemaVersion: results.SchemaVersion, Status: results.StatusOK, Complete: true}); err != nil {
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

func TestReadResultNamesImports(t *testing.T) {
	path := filepath.Join("testdata", "guidellm-sweep.json")
	s, err := ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Environment != path {
		t.Errorf("environment %q, want its path", s.Environment)
	}
}
