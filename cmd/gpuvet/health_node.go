package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/registry"
	"github.com/gpuvet/gpuvet/internal/results"
)

// `gpuvet health` as a scheduler's check of its own node (docs/slurm.md): with --NAME-drain a
// failed node takes itself out of service, and a node gpuvet took out is put back by a later ok
// check. The hooks come from the backend table (registry.NodeHealths).

// nodeHealth is one backend's hook and its three flags.
type nodeHealth struct {
	hook   *fleet.NodeHealth
	drain  bool
	node   string
	dryRun bool
	// notHere is why a dry run's node is not one the scheduler knows ("": it is): said instead of
	// what the dry run would do, which a real run would refuse.
	notHere string
}

// nodeHealths are every backend's hooks for one health command.
type nodeHealths []*nodeHealth

func (hs *nodeHealths) register(fl *pflag.FlagSet) {
	for _, hook := range registry.NodeHealths() {
		h := &nodeHealth{hook: hook}
		fl.BoolVar(&h.drain, hook.Name+"-drain", false, hook.DrainHelp)
		fl.StringVar(&h.node, hook.Name+"-node", "", hook.NodeHelp)
		fl.BoolVar(&h.dryRun, hook.Name+"-dry-run", false, hook.DryRunHelp)
		*hs = append(*hs, h)
	}
}

// each runs fn on every hook (preflight before the check, act after its verdict), stopping at
// the first error.
func (hs nodeHealths) each(fn func(*nodeHealth) error) error {
	for _, h := range hs {
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

func (h *nodeHealth) flag() string { return "--" + h.hook.Name + "-drain" }

// nodeName is this node's name for the scheduler: --NAME-node, the scheduler's variable, else the
// short host name.
func (h *nodeHealth) nodeName() (string, error) {
	if h.node != "" {
		return h.node, nil
	}
	if n := os.Getenv(h.hook.NodeEnv); h.hook.NodeEnv != "" && n != "" {
		return n, nil
	}
	hn, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("%s: no node name (%w): pass --%s-node", h.flag(), err, h.hook.Name)
	}
	n, _, _ := strings.Cut(hn, ".")
	return n, nil
}

// preflight checks that the hook runs on a node the scheduler knows: elsewhere the check would end
// in exit 1, which a Prolog's caller takes as "drain this node". A dry run says so after the check.
func (h *nodeHealth) preflight(ctx context.Context) error {
	if !h.drain {
		return nil
	}
	node, err := h.nodeName()
	if err != nil {
		if h.dryRun {
			return nil // act says it
		}
		return usageErr("%v", err)
	}
	if err := h.hook.Known(ctx, node); err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		if h.dryRun {
			h.notHere = fmt.Sprintf("node %s is not a %s node here (%v): without --%s-dry-run this check would be refused", node, h.hook.Scheduler, first, h.hook.Name)
			return nil
		}
		return usageErr("%s: node %s is not a %s node here (%v): run gpuvet health %s on the node, as %s (or name it with --%s-node), or drop %s",
			h.flag(), node, h.hook.Scheduler, first, h.flag(), h.hook.Where, h.hook.Name, h.flag())
	}
	return nil
}

// act takes this node out or back after its verdict (an error: exit 1). A check cut short changes
// nothing: a benchmark stopped half-way is no evidence against the node.
func (h *nodeHealth) act(ctx context.Context, cmd *cobra.Command, r *results.Health, cut bool) error {
	if !h.drain {
		return nil
	}
	if cut {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: the check was cut short (--timeout or a signal): node left as it is (status %s of a partial check)\n", h.flag(), r.Status)
		return nil
	}
	node, err := h.nodeName()
	if err != nil {
		return failedErr("%v", err)
	}
	why := fleet.HostReason(results.Host{Health: r})
	if h.dryRun && h.notHere != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run: %s\n", h.notHere)
		return nil
	}
	if h.dryRun {
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run: node %s is %s: %s\n", node, r.Status, map[results.Status]string{
			results.StatusFailed: "would drain it (unless someone else drained it)", results.StatusOK: "would resume it if gpuvet drained it"}[r.Status])
		return nil
	}
	state, err := fleet.StateDir()
	if err != nil {
		return failedErr("%s: %v", h.flag(), err)
	}
	did, err := h.hook.Act(ctx, state, node, r.Status, why)
	if err != nil {
		return failedErr("%s: node %s (%s): %v", h.flag(), node, r.Status, err)
	}
	if did != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), did)
	}
	return nil
}
