package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Backend slurm as the registry names it (docs/slurm.md): how `gpuvet run` opens it and how
// `gpuvet clean` removes what its killed runs left.

// Flags adds backend slurm's `gpuvet run` flags (the backend table maps each to its key).
func Flags(fl *pflag.FlagSet) {
	fl.String("partition", "", "backend slurm: only this partition's nodes")
	fl.String("slurm-nodes", "", "backend slurm: only these nodes (names or hostlists, e.g. gpu[01-16],gpu20)")
	fl.String("reservation", "", "backend slurm: only this reservation's nodes, the jobs run in it")
	fl.Bool("drain-failed", false, "backend slurm: drain each failed node with its reason (a later ok run resumes the nodes gpuvet drained), up to --max-drain")
	fl.Bool("drain-flagged", false, "backend slurm: drain flagged nodes as well as failed ones (implies --drain-failed)")
	fl.String("max-drain", config.Defaults().Slurm.MaxDrain, "backend slurm: circuit breaker: the most nodes one run may drain, a count (5) or a share of the nodes vetted (10%); past it the rest are only reported and the run fails")
}

// Open opens backend slurm from the plan (its commands are checked when it lists the nodes).
func Open(plan *config.Plan) (fleet.Backend, func(), error) {
	state, err := fleet.StateDir()
	if err != nil {
		return nil, nil, err
	}
	out, err := filepath.Abs(plan.Config.Output.Dir)
	if err != nil {
		return nil, nil, err
	}
	return &Fleet{Config: plan.Config.Slurm, Plan: plan, Slurm: Exec{}, StateDir: state, Out: out}, func() {}, nil
}

// Cleaner cancels the jobs of killed runs (by the ids their manifests name), puts back the drains
// they lifted, deletes their reservations.
func Cleaner(ctx context.Context, req fleet.CleanRequest, ms []*fleet.Manifest) error {
	state, err := fleet.StateDir()
	if err != nil {
		return &fleet.InputError{Err: err}
	}
	say := func(l string) { fmt.Fprintln(req.Out, l) }
	var errs []error
	for _, m := range ms {
		errs = append(errs, Clean(ctx, Exec{}, m, state, say))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	say(fmt.Sprintf("clean: %d slurm manifest(s), nothing left", len(ms)))
	return nil
}
