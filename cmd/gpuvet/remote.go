package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/registry"
)

// The fleet backends (ssh, opennebula, kubernetes, slurm): the registry opens each for
// fleet.Execute, which owns the whole run, and has a cleaner for what its killed runs left.

// registerRemoteFlags adds the fleet backends' flags to a command that resolves a plan (run,
// config show): each backend's own, and --dry-run, which every backend that acts on its nodes
// reads from its own section (the backend table maps it to each key).
func registerRemoteFlags(fl *pflag.FlagSet) {
	for _, name := range registry.Names() {
		if b, _ := registry.Get(name); b.Flags != nil {
			b.Flags(fl)
		}
	}
	fl.Bool("dry-run", false, "backends kubernetes and slurm: vet, but take no action on any node (labels, taints, condition; drains, resumes): print and record each one it would take")
}

// fleetMemoryLimit is the fleet controller's soft memory limit (the Go runtime's; GOMEMLIMIT, when
// set, wins). A controller holds every node's results until its verdicts and reports are written
// (about 250 KB a node of 8 GPUs); with the runtime's default, collecting only when the heap has
// doubled, a 1,000-node run's RSS was 3.5 times its live heap (1,302 MiB for 370 MB:
// docs/k8s-scale.md). Under the limit the collector runs sooner and returns freed memory, trading
// CPU (at most half of it, by the runtime's own cap) for staying within 1 GiB; a fleet whose live
// results outgrow it (several thousand nodes) needs GOMEMLIMIT raised.
const fleetMemoryLimit = 800 << 20

// runRemotePlan runs a fleet plan through fleet.Execute, with the backend the registry names.
func runRemotePlan(cmd *cobra.Command, plan *config.Plan) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(fleetMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	err = fleet.Execute(ctx, plan, b, fleet.ExecOptions{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), ToolVersion: version()})
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
