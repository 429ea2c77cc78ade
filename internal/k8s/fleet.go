package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Fleet is backend kubernetes for fleet.Execute, which owns the run: the cluster's chosen GPU
// nodes are the hosts. Fleet chooses them (Hosts, creating nothing), creates the run's namespace
// before the first node's provision, and deletes it once every node is done (Close).
type Fleet struct {
	Cluster  *Cluster
	Config   config.Config
	Plan     *config.Plan // the resolved plan every node's host pipeline runs (Config is its Config)
	Options  Options      // the backend's settings; RunID and Progress come from Execute
	Verdicts Verdicts     // the labels and taints written onto the judged nodes (verdicts.go)
	run      *Run
}

// Hosts checks access, chooses the nodes and the model cache's StorageClass: bad input (exit 2)
// before anything is created.
func (f *Fleet) Hosts(ctx context.Context, ri fleet.RunInfo) ([]fleet.Host, []results.SkippedHost, error) {
	if f.Plan == nil {
		return nil, nil, errors.New("kubernetes: no plan for the nodes' host pipeline (k8s.Fleet.Plan; a bug)")
	}
	opt := f.Options
	opt.RunID = ri.ID
	opt.Progress = func(format string, a ...any) { ri.Say(fmt.Sprintf(format, a...)) }
	// A node gpuvet quarantined, or one pending (the gate), is vetted: its pods tolerate them.
	opt.Selection.Tolerations = append(slices.Clone(opt.Selection.Tolerations), OwnTolerations()...)
	ri.Say(fmt.Sprintf("kubernetes: context %s (%s)", f.Cluster.Context, f.Cluster.Server))
	if err := CheckVerdictAccess(ctx, f.Cluster.Client, f.Verdicts); err != nil {
		return nil, nil, err
	}
	r, err := Prepare(ctx, f.Cluster, f.Config, opt)
	if err != nil {
		return nil, nil, err
	}
	// `gpuvet clean` finds the manifests of this cluster by its server.
	for k, v := range map[string]string{"context": f.Cluster.Context, "server": f.Cluster.Server} {
		if err := ri.Manifest.SetTarget(k, v); err != nil {
			return nil, nil, err
		}
	}
	r.man, r.plan, r.out = ri.Manifest, f.Plan, ri.Out
	f.run = r
	for _, n := range r.Nodes() {
		due := ""
		if n.Due != "" {
			due = " (due: " + n.Due + ")"
		}
		ri.Say(fmt.Sprintf("node %s: %d free of %d nvidia.com/gpu %s%s", n.Name, n.Free, n.Allocatable, n.Product, due))
	}
	ri.Say(r.CacheNote())
	hosts := make([]fleet.Host, len(r.nodes))
	for i, n := range r.nodes {
		hosts[i] = &nodeHost{r: r, node: n, index: i}
	}
	return hosts, r.Skipped(), nil
}

// Parallel is kubernetes.parallel_nodes.
func (f *Fleet) Parallel() int { return max(1, f.Options.ParallelNodes) }

// CleanupTimeout bounds one node's cleanup (its pods and Jobs; the namespace goes in Close).
func (f *Fleet) CleanupTimeout() time.Duration { return 2 * time.Minute }

// Finish records how many API requests the run sent (every node's record is its own summary).
func (f *Fleet) Finish(s *results.Summary) {
	if n := f.Cluster.Requests.Load(); n > 0 {
		if s.Fleet == nil {
			s.Fleet = &results.Fleet{}
		}
		s.Fleet.APIRequests = n
	}
}

// Close deletes the run's namespace (fleet.Closer).
func (f *Fleet) Close(ctx context.Context, outs []fleet.Outcome) error {
	if f.run == nil {
		return nil
	}
	return f.run.Close(ctx, outs)
}
