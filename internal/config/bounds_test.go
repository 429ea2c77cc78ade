package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config far larger than any real one, or listing more models than a run can serve, is refused
// (exit 2) instead of taking gigabytes and passing.
func TestConfigBounds(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	var b strings.Builder
	b.WriteString("models:\n")
	for b.Len() <= 5<<20 {
		fmt.Fprintf(&b, "  - m%d\n", b.Len())
	}
	os.WriteFile(huge, []byte(b.String()), 0o644)
	if _, err := Load(Options{Files: []string{huge}}); err == nil || !strings.Contains(err.Error(), "more than 4 MiB") {
		t.Errorf("huge config: %v", err)
	}
	many := filepath.Join(dir, "many.yaml")
	b.Reset()
	b.WriteString("models:\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "  - org/model-%d\n", i)
	}
	os.WriteFile(many, []byte(b.String()), 0o644)
	if _, err := Load(Options{Files: []string{many}}); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Errorf("300 models: %v", err)
	}
}
