package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/slurm"
)

// Backend slurm (docs/slurm.md): its flags, how `gpuvet run` opens it (remote.go's table), and
// its cleaner.

// slurmFlagPaths maps the Slurm flags to their config keys.
var slurmFlagPaths = map[string]string{
	"partition": "slurm.partition", "slurm-nodes": "slurm.nodes", "reservation": "slurm.reservation",
	"drain-failed": "slurm.drain_failed", "drain-flagged": "slurm.drain_flagged",
}

func registerSlurmFlags(fl *pflag.FlagSet) {
	fl.String("partition", "", "backend slurm: only this partition's nodes")
	fl.String("slurm-nodes", "", "backend slurm: only these nodes (names or hostlists, e.g. gpu[01-16],gpu20)")
	fl.String("reservation", "", "backend slurm: only this reservation's nodes, the jobs run in it")
	fl.Bool("drain-failed", false, "backend slurm: drain each failed node with its reason (a later ok run resumes the nodes gpuvet drained); at most slurm.max_drain nodes")
	fl.Bool("drain-flagged", false, "backend slurm: drain flagged nodes as well as failed ones (implies --drain-failed)")
}

// openSlurm opens backend slurm (its commands are checked when it lists the nodes).
func openSlurm(plan *config.Plan) (fleet.Backend, func(), error) {
	state, err := fleet.StateDir()
	if err != nil {
		return nil, nil, err
	}
	out, err := filepath.Abs(plan.Config.Output.Dir)
	if err != nil {
		return nil, nil, err
	}
	return &slurm.Fleet{Config: plan.Config.Slurm, Plan: plan, Slurm: slurm.Exec{}, StateDir: state, Out: out}, func() {}, nil
}

// cleanSlurm cancels the jobs of killed runs (by the ids their manifests name), puts back the
// drains they lifted, deletes their reservations.
func cleanSlurm(ctx context.Context, req cleanRequest, ms []*fleet.Manifest) error {
	state, err := fleet.StateDir()
	if err != nil {
		return usageErr("%v", err)
	}
	say := func(l string) { fmt.Fprintln(req.cmd.OutOrStdout(), l) }
	var errs []error
	for _, m := range ms {
		errs = append(errs, slurm.Clean(ctx, slurm.Exec{}, m, state, say))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	say(fmt.Sprintf("clean: %d slurm manifest(s), nothing left", len(ms)))
	return nil
}
