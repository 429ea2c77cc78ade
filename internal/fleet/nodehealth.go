package fleet

import (
	"context"

	"github.com/gpuvet/gpuvet/internal/results"
)

// NodeHealth is a scheduler's hook on its own node for `gpuvet health` run by the scheduler (Slurm's
// HealthCheckProgram, Prolog or Epilog): after the check the node takes itself out of service, or
// back into it when gpuvet took it out. A backend offers one through its row in the registry;
// `gpuvet health` adds --NAME-drain, --NAME-node and --NAME-dry-run for it and names no backend.
type NodeHealth struct {
	// Name is the flags' prefix (slurm: --slurm-drain); Scheduler names it in words ("Slurm").
	Name, Scheduler string
	// Where says where the hook runs ("slurmd's HealthCheckProgram, Prolog or Epilog").
	Where string
	// DrainHelp, NodeHelp and DryRunHelp are the three flags' help.
	DrainHelp, NodeHelp, DryRunHelp string
	// NodeEnv is the variable the scheduler sets to this node's name (else the short host name).
	NodeEnv string
	// Known checks, before the health check starts, that node is the scheduler's: off a cluster
	// the action would fail after the check, which a Prolog's caller takes as "drain this node".
	Known func(ctx context.Context, node string) error
	// Act takes the node out (failed) or back (ok, when gpuvet took it out); it returns what it
	// did ("" nothing). stateDir keeps gpuvet's record of what it did.
	Act func(ctx context.Context, stateDir, node string, st results.Status, why string) (string, error)
}
