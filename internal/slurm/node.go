package slurm

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The node-side mode: `gpuvet health --slurm-drain` as slurmd's HealthCheckProgram, Prolog or
// Epilog, on the node itself (docs/slurm.md).

// DrainNode drains node with reason, recorded first in gpuvet's record (stateDir), unless someone
// else drained it (their drain stays: said, no error). It returns what it did, in words.
func DrainNode(ctx context.Context, s Runner, stateDir, node, runID, reason string) (string, error) {
	n, cluster, d, err := nodeState(ctx, s, stateDir, node)
	if err != nil {
		return "", err
	}
	if n.Drained() && !d.Ours(cluster, n) {
		return fmt.Sprintf("%s: already drained by %s (%q): left alone", node, cmp.Or(n.ReasonBy, "someone"), n.Reason), nil
	}
	if err := drain(ctx, s, stateDir, cluster, node, runID, reason); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: drained: %s", node, reason), nil
}

// ResumeNode resumes node when gpuvet drained it (its record and its reason both say so) and
// forgets the drain; any other node is left as it is ("" said).
func ResumeNode(ctx context.Context, s Runner, stateDir, node string) (string, error) {
	n, cluster, d, err := nodeState(ctx, s, stateDir, node)
	if err != nil {
		return "", err
	}
	if !d.Ours(cluster, n) {
		return "", nil
	}
	if _, err := s.Run(ctx, "scontrol", "update", "nodename="+node, "state=resume"); err != nil {
		return "", err
	}
	run := d.Nodes[drainKey(cluster, node)].RunID
	if err := forgetDrain(stateDir, cluster, node); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: ok: resumed (gpuvet drained it: %s)", node, run), nil
}

// HealthAction acts on a node's own health verdict: failed drains it with the reason, ok resumes
// it when gpuvet drained it; anything else (flag, inconclusive) changes nothing.
func HealthAction(ctx context.Context, s Runner, stateDir, node string, st results.Status, why string) (string, error) {
	switch st {
	case results.StatusFailed:
		id := "health@" + time.Now().UTC().Format("20060102T150405Z")
		return DrainNode(ctx, s, stateDir, node, id, Reason(id, st, why))
	case results.StatusOK:
		return ResumeNode(ctx, s, stateDir, node)
	}
	return "", nil
}

func nodeState(ctx context.Context, s Runner, stateDir, node string) (Node, string, *Drains, error) {
	cfg, err := s.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		return Node{}, "", nil, err
	}
	n, err := showNode(ctx, s, node)
	if err != nil {
		return Node{}, "", nil, err
	}
	d, err := ReadDrains(stateDir)
	return n, ClusterName(cfg), d, err
}

// showNode reads one node (scontrol -o show node NAME).
func showNode(ctx context.Context, s Runner, node string) (Node, error) {
	out, err := s.Run(ctx, "scontrol", "-o", "show", "node", node)
	if err != nil {
		return Node{}, err
	}
	ns, err := ParseNodes(out)
	if err != nil || len(ns) != 1 {
		return Node{}, fmt.Errorf("node %s: %w (scontrol show node)", node, err)
	}
	return ns[0], nil
}

// NodeHealth is backend slurm's hook on its own node: `gpuvet health --slurm-drain` as slurmd's
// HealthCheckProgram, Prolog or Epilog (docs/slurm.md). Each scontrol call is bounded (10 s to ask,
// 15 s to act) and the whole action by 30 s, inside slurmd's own limits for the program.
var NodeHealth = &fleet.NodeHealth{
	Name:       "slurm",
	Scheduler:  "Slurm",
	Where:      "slurmd's HealthCheckProgram, Prolog or Epilog",
	DrainHelp:  "on a Slurm node (HealthCheckProgram, Prolog, Epilog): drain the node with the reason when the check fails, resume it when a later check is ok and gpuvet drained it (never another's drain)",
	NodeHelp:   "with --slurm-drain: the node's Slurm name (default $SLURMD_NODENAME, else the short host name)",
	DryRunHelp: "with --slurm-drain: say the drain or resume, take none",
	NodeEnv:    "SLURMD_NODENAME",
	Known: func(ctx context.Context, node string) error {
		_, err := (Exec{Timeout: 10 * time.Second}).Run(ctx, "scontrol", "-o", "show", "node", node)
		return err
	},
	Act: func(ctx context.Context, stateDir, node string, st results.Status, why string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return HealthAction(ctx, Exec{Timeout: 15 * time.Second}, stateDir, node, st, why)
	},
}
