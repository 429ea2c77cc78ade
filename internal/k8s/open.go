package k8s

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Open is how `gpuvet run` opens backend kubernetes (the registry's): it checks the forms only the
// Kubernetes libraries read and connects to the cluster (errors: bad input, nothing created).
func Open(plan *config.Plan) (fleet.Backend, func(), error) {
	c := plan.Config
	kc := c.Kubernetes
	bad := func(key string, err error) (fleet.Backend, func(), error) {
		return nil, nil, fmt.Errorf("%s (%s): %w", key, plan.Source(key), err)
	}
	tols, err := ParseTolerations(strings.Join(kc.Tolerations, ","))
	if err != nil {
		return bad("kubernetes.tolerations", err)
	}
	if err := CheckSelector(kc.NodeSelector); err != nil {
		return bad("kubernetes.node_selector", err)
	}
	hargs, err := splitArgs(kc.HealthArgs)
	if err != nil {
		return bad("kubernetes.health_args", err)
	}
	maxUnhealthy, err := fleet.ParseMaxUnhealthy(kc.MaxUnhealthy)
	if err != nil {
		return bad("kubernetes.max_unhealthy", err)
	}
	cl, err := ConnectWith(kc.Kubeconfig, kc.Context, LimitsFrom(kc))
	if err != nil {
		return nil, nil, err
	}
	return &Fleet{Cluster: cl, Config: c, Plan: plan, Options: Options{
		Image: kc.Image, EngineImage: kc.EngineImage,
		PriorityClass: kc.PriorityClass,
		Selection:     Selection{Selector: kc.NodeSelector, Tolerations: tols, Max: kc.Nodes, OnlyDue: kc.OnlyDue},
		ParallelNodes: kc.ParallelNodes, KeepOnFailure: kc.KeepOnFailure, CacheSize: cacheSize(c.ModelCache),
		CacheAccess: c.ModelCache.AccessMode, StorageClass: kc.StorageClass, HealthArgs: hargs,
		JobTimeout: kc.JobTimeout.D(), StartGrace: kc.StartGrace.D(), Dynamo: kc.Dynamo, DynamoService: kc.DynamoTarget == config.DynamoTargetService,
		HubEndpoint: c.ModelCache.Endpoint, CacheOwnerInit: kc.CacheOwnerInit, CacheNamespace: kc.CacheNamespace, CacheNamespaceAllowExisting: kc.CacheNamespaceAllowExisting,
	}, Verdicts: Verdicts{Label: kc.LabelNodes, TaintFailed: kc.TaintFailed, TaintFlagged: kc.TaintFlagged, Gate: kc.Gate,
		DryRun: kc.DryRun, MaxUnhealthy: maxUnhealthy, ValidFor: kc.VerdictValidFor.D(), PendingRetries: kc.PendingRetries}}, func() {}, nil
}

// Cleaner is `gpuvet clean` for kubernetes: it deletes every gpuvet namespace (or one run's), what
// runs left in the kept cache's namespace, with --cache the cache itself, with --untaint the taints
// runs put on nodes, and the manifests of this cluster.
func Cleaner(ctx context.Context, req fleet.CleanRequest, ms []*fleet.Manifest) error {
	kc := req.Plan.Config.Kubernetes
	cl, err := ConnectWith(kc.Kubeconfig, kc.Context, LimitsFrom(kc))
	if err != nil {
		return &fleet.InputError{Err: err}
	}
	out := req.Out
	if req.Untaint { // before anything is deleted: a missing permission is the user's to fix (exit 2)
		if err := CheckAccess(ctx, cl.Client, "", "", UntaintNeeds()); err != nil {
			return &fleet.InputError{Err: fmt.Errorf("--untaint: %w", err)}
		}
	}
	done, err := Clean(ctx, cl, req.RunID, req.Cache, 5*time.Minute, kc.CacheNamespace)
	for _, what := range done {
		fmt.Fprintf(out, "deleted %s\n", what)
	}
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	if len(done) == 0 {
		fmt.Fprintln(out, "nothing to clean: no gpuvet namespace in", cl.Context)
	}
	if req.Untaint {
		lifted, err := Untaint(ctx, cl.Client, req.RunID)
		for _, what := range lifted {
			fmt.Fprintln(out, what)
		}
		if err != nil {
			return fmt.Errorf("clean --untaint: %w", err)
		}
		if len(lifted) == 0 {
			fmt.Fprintf(out, "no %s taint to lift in %s\n", TaintUnhealthy, cl.Context)
		}
	}
	// Every object of a run lives in its namespace or is labelled with it in the cache's: both are clean.
	other := func(m *fleet.Manifest) bool { return m.Target["server"] != cl.Server }
	here := slices.DeleteFunc(slices.Clone(ms), other)
	if err := fleet.FinishManifests(here, func(fleet.Object) bool { return true }); err != nil {
		return fmt.Errorf("manifests: %w", err)
	}
	return nil
}

// LimitsFrom are kubernetes.qps and kubernetes.burst as the client's rate limits.
func LimitsFrom(kc config.Kubernetes) Limits {
	return Limits{QPS: float32(kc.QPS), Burst: kc.Burst}
}

// cacheSize is the cache PVC's size, or off: `model_cache: off` (dir off) turns the volume off too.
func cacheSize(mc config.ModelCache) string {
	if config.IsOff(mc.Dir) {
		return "off"
	}
	return mc.Size
}

// splitArgs splits a flag value into words with the engine template's quoting rules.
func splitArgs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return engine.SplitWords(s)
}
