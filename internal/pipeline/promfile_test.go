package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// output.prometheus_file writes the textfile there too (a node exporter's directory), beside the
// reports of the run's own directory; a path it cannot write is an error naming the key.
func TestWriteReportsPrometheusFile(t *testing.T) {
	s := &results.Summary{SchemaVersion: results.SchemaVersion, RunID: "20261201T000000Z-0000abcd", Backend: "kubernetes", Status: results.StatusOK, Complete: true,
		Hosts: []results.Host{{Name: "node-a", Status: results.StatusOK}}}
	dir, textfile := t.TempDir(), filepath.Join(t.TempDir(), "gpuvet.prom")
	if err := WriteReports(s, dir, config.Output{PrometheusFile: textfile}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(textfile)
	if err != nil || !strings.Contains(string(b), `run_id="20261201T000000Z-0000abcd"`) || !strings.Contains(string(b), `gpuvet_host_status{`) {
		t.Fatalf("textfile: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "gpuvet.prom")); err == nil {
		t.Error("output.prometheus false wrote gpuvet.prom into the run's directory")
	}
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o644)
	if err := WriteReports(s, dir, config.Output{PrometheusFile: filepath.Join(blocked, "gpuvet.prom")}); err == nil || !strings.Contains(err.Error(), "output.prometheus_file") {
		t.Errorf("an unwritable path: %v", err)
	}
}
