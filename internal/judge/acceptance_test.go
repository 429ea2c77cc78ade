package judge

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestAcceptanceExitCode(t *testing.T) {
	for st, want := range map[results.Status]int{
		results.StatusOK: 0, results.StatusInconclusive: 3, results.StatusFlag: 1, results.StatusFailed: 1,
		results.StatusInterrupted: 1, results.StatusIncomplete: 1, results.StatusNotRun: 1, "": 1,
	} {
		if got := AcceptanceExitCode(&results.Summary{Status: st, Complete: true}); got != want {
			t.Errorf("%q: exit %d, want %d", st, got, want)
		}
	}
	// A run that did not finish decides nothing, whatever its status says so far.
	if got := AcceptanceExitCode(&results.Summary{Status: results.StatusOK}); got != 1 {
		t.Errorf("incomplete ok run: exit %d, want 1", got)
	}
	if got := AcceptanceExitCode(nil); got != 1 {
		t.Errorf("no summary: exit %d", got)
	}
}
