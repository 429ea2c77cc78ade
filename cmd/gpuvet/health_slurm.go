package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/slurm"
)

// `gpuvet health` as a Slurm node's HealthCheckProgram, Prolog or Epilog (docs/slurm.md): with
// --slurm-drain a failed node drains itself with its reason, and a node gpuvet drained is resumed
// by a later ok check.

type slurmHealth struct {
	drain  bool
	node   string
	dryRun bool
}

func (s *slurmHealth) register(fl *pflag.FlagSet) {
	fl.BoolVar(&s.drain, "slurm-drain", false, "on a Slurm node (HealthCheckProgram, Prolog, Epilog): drain the node with the reason when the check fails, resume it when a later check is ok and gpuvet drained it (never another's drain)")
	fl.StringVar(&s.node, "slurm-node", "", "with --slurm-drain: the node's Slurm name (default $SLURMD_NODENAME, else the short host name)")
	fl.BoolVar(&s.dryRun, "slurm-dry-run", false, "with --slurm-drain: say the drain or resume, take none")
}

// nodeName is this node's Slurm name: --slurm-node, $SLURMD_NODENAME, else the short host name.
func (s *slurmHealth) nodeName() (string, error) {
	if s.node != "" {
		return s.node, nil
	}
	if n := os.Getenv("SLURMD_NODENAME"); n != "" {
		return n, nil
	}
	hn, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("--slurm-drain: no node name (%v): pass --slurm-node", err)
	}
	n, _, _ := strings.Cut(hn, ".")
	return n, nil
}

// preflight checks, before the health check starts, that --slurm-drain runs on a node Slurm
// knows: off a cluster the check would end in scontrol's raw errors and exit 1, which a Prolog's
// caller takes as "drain this node" (exit 2 here, before anything ran; a dry run is not checked).
func (s *slurmHealth) preflight(ctx context.Context) error {
	if !s.drain || s.dryRun {
		return nil
	}
	node, err := s.nodeName()
	if err != nil {
		return usageErr("%v", err)
	}
	if _, err := (slurm.Exec{Timeout: 10 * time.Second}).Run(ctx, "scontrol", "-o", "show", "node", node); err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		return usageErr("--slurm-drain: node %s is not a Slurm node here (%v): run gpuvet health --slurm-drain on the node, as slurmd's HealthCheckProgram, Prolog or Epilog (or name it with --slurm-node), or drop --slurm-drain", node, first)
	}
	return nil
}

// act drains or resumes this node after its verdict; an error is exit 1 (the check's own verdict
// is printed above). A check cut short (--timeout, a signal) changes nothing: its figures are
// partial, and a benchmark stopped half-way is no evidence against the node.
func (s *slurmHealth) act(ctx context.Context, cmd *cobra.Command, h *results.Health, cut bool) error {
	if !s.drain {
		return nil
	}
	if cut {
		fmt.Fprintf(cmd.ErrOrStderr(), "--slurm-drain: the check was cut short (--timeout or a signal): node left as it is (status %s of a partial check)\n", h.Status)
		return nil
	}
	node, err := s.nodeName()
	if err != nil {
		return failedErr("%v", err)
	}
	why := fleet.HostReason(results.Host{Health: h})
	if s.dryRun {
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run: node %s is %s: %s\n", node, h.Status, map[results.Status]string{
			results.StatusFailed: "would drain it (unless someone else drained it)", results.StatusOK: "would resume it if gpuvet drained it"}[h.Status])
		return nil
	}
	state, err := fleet.StateDir()
	if err != nil {
		return failedErr("--slurm-drain: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	did, err := slurm.HealthAction(ctx, slurm.Exec{Timeout: 15 * time.Second}, state, node, h.Status, why)
	if err != nil {
		return failedErr("--slurm-drain: node %s (%s): %v", node, h.Status, err)
	}
	if did != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), did)
	}
	return nil
}
