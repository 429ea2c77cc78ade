package main

import (
	"context"
	"errors"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/registry"
)

// registerRemoteFlags adds the fleet backends' flags to a command that resolves a plan (run,
// config show): each backend's own, and --dry-run, which each backend that acts on its nodes reads
// from its own section.
func registerRemoteFlags(fl *pflag.FlagSet) {
	for _, name := range registry.Names() {
		if b, _ := registry.Get(name); b.Flags != nil {
			b.Flags(fl)
		}
	}
	fl.Bool("dry-run", false, "backends kubernetes and slurm: vet, but take no action on any node (labels, taints, condition; drains, resumes): print and record each one it would take")
}

// fleetMemoryLimit is the fleet controller's soft memory limit (GOMEMLIMIT wins). It holds every
// node's results (about 250 KB a node of 8 GPUs); collecting only when the heap doubled, a 1,000-node
// run's RSS was 3.5 times its live heap (docs/k8s-scale.md). It trades CPU (at most half) for
// staying within 1 GiB; several thousand nodes need GOMEMLIMIT raised.
const fleetMemoryLimit = 800 << 20

// runRemotePlan runs a fleet plan through fleet.Execute, with the backend the registry names.
func runRemotePlan(cmd *cobra.Command, plan *config.Plan) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(fleetMemoryLimit)
	}
	ctx, stop := interruptible(context.Background())
	defer stop()
	rb, ok := registry.Get(plan.Config.Backend)
	if !ok {
		return usageErr("backend %s: this gpuvet has no fleet backend of that name", plan.Config.Backend)
	}
	b, closeBackend, err := rb.Open(plan)
	if err != nil {
		return usageErr("%v", err)
	}
	defer closeBackend()
	return fleetErr(fleet.Execute(ctx, plan, b, fleet.ExecOptions{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), ToolVersion: version()}))
}

// fleetErr is a fleet run's or clean's error with its exit code: bad input found before anything
// started (fleet.InputError) 2, a judged status its own, anything else 1.
func fleetErr(err error) error {
	var input *fleet.InputError
	var status *fleet.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &input):
		return usageErr("%v", err)
	case errors.As(err, &status):
		return &exitError{code: status.Code, err: err}
	}
	return failedErr("%v", err)
}
