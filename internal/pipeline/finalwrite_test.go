package pipeline

import (
	"context"
	"os"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A run whose final summary.json cannot be written (the disk filled, the folder went away) is
// exit 1, the README's "a result that could not be written after it was measured": before, the
// write's error was a warning only and the run exited 0, summary.json on disk still the first
// one's "incomplete".
func TestUnwritableFinalSummaryIsExit1(t *testing.T) {
	p := quick(t)
	out := p.Config.Output.Dir
	d := Deps{Judge: func(*results.Summary, *config.Plan) error {
		// The folder is replaced by a file: no write into it can succeed, root or not.
		if err := os.RemoveAll(out); err != nil {
			return err
		}
		return os.WriteFile(out, nil, 0o644)
	}}
	res, err := Run(context.Background(), p, d, Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 {
		t.Errorf("exit %d, want 1: summary.json was not written (status %s)", res.ExitCode, res.Summary.Status)
	}
}
