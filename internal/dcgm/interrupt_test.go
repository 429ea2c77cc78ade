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
