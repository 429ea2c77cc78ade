package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// --force removes only what the earlier run's summary lists under raw/, logs/ and hosts/, and never
// through a symlink out of the folder or outside those folders, whatever that summary says: a
// hostile or hand-edited summary cannot make it delete a user's file.
func TestForceRemovesOnlyTheEarlierRunsFiles(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "raw", "m", "gpu0.json"), "{}") // the earlier run's
	write(filepath.Join(dir, "notes.txt"), "the user's")     // listed by a hostile summary
	write(filepath.Join(outside, "secret"), "the user's")    // reached through raw/link
	if err := os.Symlink(outside, filepath.Join(dir, "raw", "link")); err != nil {
		t.Fatal(err)
	}
	s := &results.Summary{SchemaVersion: results.SchemaVersion, RunID: "old", Status: results.StatusOK,
		Outputs: []string{"raw/m/gpu0.json", "notes.txt", "raw/link/secret", "raw/../notes.txt", "../x"}}
	if err := results.WriteJSON(filepath.Join(dir, "summary.json"), s); err != nil {
		t.Fatal(err)
	}
	l, left, err := LockOutput(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := os.Stat(filepath.Join(dir, "raw", "m", "gpu0.json")); err == nil {
		t.Error("the earlier run's raw/m/gpu0.json survived --force")
	}
	for _, p := range []string{filepath.Join(dir, "notes.txt"), filepath.Join(outside, "secret")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if !strings.Contains(strings.Join(left, "\n"), "raw/link") {
		t.Errorf("left %q: want the symlink named", left)
	}
}
