package judge

import "github.com/gpuvet/gpuvet/internal/results"

// Exit codes of the acceptance mode (`gpuvet run --acceptance`, run.acceptance): the contract a
// gate reads (a Slurm prolog, a CI step, a provisioning workflow), docs/acceptance.md. Only a
// node found ok passes; an undecided run has a code of its own, so a gate never takes it for a
// pass, nor for a finding about the hardware. 2 stays the CLI's bad input (nothing ran), so the
// undecided code is 3 (Meta's GCM also uses 3 for unknown; its 2, fail, is gpuvet's bad input).
const (
	ExitAccepted  = 0 // ok: every gate decided and passed
	ExitRejected  = 1 // flag or failed (or a run that did not finish): not accepted
	ExitUndecided = 3 // inconclusive: nothing fired, but something could not decide; run it again
)

// AcceptanceExitCode is the acceptance mode's exit code for a judged summary: 0 only for a
// complete ok run, 3 for a complete inconclusive one, 1 for everything else.
func AcceptanceExitCode(s *results.Summary) int {
	if s == nil || !s.Complete {
		return ExitRejected
	}
	switch s.Status {
	case results.StatusOK:
		return ExitAccepted
	case results.StatusInconclusive:
		return ExitUndecided
	}
	return ExitRejected
}
