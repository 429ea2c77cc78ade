package dcgm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A run stopped from outside (Ctrl-C, the run's own deadline) is not the DCGM timeout: the error
// said "did not finish within 15m0s: raise the DCGM timeout" after a second, advice that does not apply.
func TestRunInterruptedIsNotATimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	d := Run(ctx, Options{Level: 1, Timeout: 15 * time.Minute, Binary: fakeDCGMI(t, "sleep 5")})
	if d.Status != results.StatusFailed || strings.Contains(d.Error, "raise the DCGM timeout") || !strings.Contains(d.Error, "interrupted") {
		t.Errorf("interrupted run: %s %q", d.Status, d.Error)
	}
}

// A diagnostic whose every test was skipped (a GPU DCGM does not support, a test that could not
// start) ran nothing: it is skipped with a note saying so, not a pass.
func TestRunAllSkippedIsNotAPass(t *testing.T) {
	doc := `{"DCGM Diagnostic":{"test_categories":[{"category":"Deployment","tests":[{"name":"software","results":[{"entity_group":"GPU","entity_id":0,"status":"Skip"}]}]}]},"metadata":{"version":"4.1.1"}}`
	d := Run(context.Background(), Options{Level: 1, Binary: fakeDCGMI(t, "echo '"+doc+"'")})
	if d.Status != results.StatusSkipped || !strings.Contains(d.Note, "skipped") || len(d.Tests) != 1 {
		t.Errorf("every test skipped: %s note %q tests %d", d.Status, d.Note, len(d.Tests))
	}
	doc = strings.Replace(doc, `"status":"Skip"`, `"status":"Pass"`, 1)
	if d := Run(context.Background(), Options{Level: 1, Binary: fakeDCGMI(t, "echo '"+doc+"'")}); d.Status != results.StatusOK {
		t.Errorf("a test passed: %s", d.Status)
	}
}
