package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/modelcache"
)

// Backend kubernetes: its flags, how `gpuvet run` opens it for fleet.Execute (remote.go's table),
// and its cleaner.

// kubeFlagPaths maps the Kubernetes flags to their config keys: a flag given on the command line
// sets its key, above files, --set and GPUVET_* (flags left out set nothing).
var kubeFlagPaths = map[string]string{
	"kubeconfig": "kubernetes.kubeconfig", "context": "kubernetes.context", "node-selector": "kubernetes.node_selector",
	"tolerations": "kubernetes.tolerations", "nodes": "kubernetes.nodes", "parallel-nodes": "kubernetes.parallel_nodes",
	"image": "kubernetes.image", "engine-image": "kubernetes.engine_image", "cache-size": "model_cache.size",
	"cache-access-mode": "model_cache.access_mode", "storage-class": "kubernetes.storage_class",
	"health-args": "kubernetes.health_args", "keep-on-failure": "kubernetes.keep_on_failure",
	"job-timeout": "kubernetes.job_timeout", "dynamo": "kubernetes.dynamo",
	"hub-endpoint": "model_cache.endpoint", "cache-owner-init": "kubernetes.cache_owner_init",
	"cache-namespace": "kubernetes.cache_namespace", "dynamo-target": "kubernetes.dynamo_target",
	"label-nodes": "kubernetes.label_nodes", "taint-failed": "kubernetes.taint_failed", "taint-flagged": "kubernetes.taint_flagged",
	"gate": "kubernetes.gate", "pending-retries": "kubernetes.pending_retries", "only-due": "kubernetes.only_due",
	"verdict-valid-for": "kubernetes.verdict_valid_for", "max-unhealthy": "kubernetes.max_unhealthy",
	"priority-class": "kubernetes.priority_class",
}

// registerKubeConnectFlags adds --kubeconfig and --context (run, config show, clean); they set
// kubernetes.kubeconfig and kubernetes.context.
func registerKubeConnectFlags(fl *pflag.FlagSet) {
	fl.String("kubeconfig", "", "backend kubernetes: kubeconfig file (kubernetes.kubeconfig; default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.String("context", "", "backend kubernetes: kubeconfig context (kubernetes.context; default: the current one)")
}

// registerKubeFlags adds the Kubernetes flags to a command that resolves a plan (run, config show).
// Their values are read through the plan; the defaults shown are the keys' (config.Defaults).
func registerKubeFlags(fl *pflag.FlagSet) {
	d := config.Defaults()
	registerKubeConnectFlags(fl)
	fl.String("node-selector", "", "backend kubernetes: only nodes matching this label selector, e.g. nvidia.com/gpu.product=NVIDIA-H200")
	fl.String("tolerations", "", "backend kubernetes: taints to tolerate: key[=value][:effect],… (* tolerates all)")
	fl.Int("nodes", d.Kubernetes.Nodes, "backend kubernetes: vet at most N GPU nodes (0: all with a free GPU)")
	fl.Int("parallel-nodes", d.Kubernetes.ParallelNodes, "backend kubernetes: how many nodes run at once")
	fl.String("image", "", "backend kubernetes: gpuvet's own image for the in-cluster Jobs (see docs/kubernetes.md: ko build)")
	fl.String("engine-image", "", "backend kubernetes: the engine image (default vllm/vllm-openai:v<engine.version>)")
	fl.String("cache-size", d.ModelCache.Size, "backend kubernetes: model-cache PVC size, or off (model_cache.size)")
	fl.String("cache-access-mode", d.ModelCache.AccessMode, "backend kubernetes: model-cache PVC access: auto, ReadWriteOnce (one per node) or ReadWriteMany (one shared)")
	fl.String("storage-class", "", "backend kubernetes: StorageClass of the model cache (default: the cluster's default)")
	fl.String("health-args", "", "backend kubernetes: extra arguments for 'gpuvet health' in each node's health Job, e.g. '--burn 60s'")
	fl.Bool("keep-on-failure", false, "backend kubernetes: keep the run's namespace when something failed")
	fl.Duration("job-timeout", d.Kubernetes.JobTimeout.D(), "backend kubernetes: limit for each in-cluster gpuvet Job")
	fl.Bool("dynamo", false, "backend kubernetes: serve through a DynamoGraphDeployment (needs the dynamographdeployments.nvidia.com CRD)")
	fl.String("hub-endpoint", "", "the hub (or mirror) the model cache is filled from (model_cache.endpoint; default $HF_ENDPOINT, else "+modelcache.DefaultEndpoint+")")
	fl.String("cache-namespace", d.Kubernetes.CacheNamespace, "backend kubernetes: the namespace that keeps the model cache between runs (\"\": the run's own, deleted with it; 'gpuvet clean --cache' removes it)")
	fl.String("dynamo-target", d.Kubernetes.DynamoTarget, "backend kubernetes: where the Dynamo load goes: pod (a Ready frontend pod) or service (the frontend Service's ClusterIP, through kube-proxy)")
	fl.Bool("label-nodes", false, "backend kubernetes: label each vetted node with its judged status (gpuvet.io/status=ok|inconclusive|flag|failed, gpuvet.io/run=RUN_ID); needs nodes patch")
	fl.Bool("taint-failed", false, "backend kubernetes: taint each failed node gpuvet.io/unhealthy=RUN_ID:NoSchedule, the reason in an annotation (lift with 'gpuvet clean --untaint'); needs nodes get, patch")
	fl.Bool("taint-flagged", false, "backend kubernetes: taint flagged nodes as well as failed ones (implies --taint-failed)")
	fl.Bool("gate", false, "backend kubernetes: the acceptance gate (docs/acceptance.md): a node tainted "+k8s.TaintPending+":NoSchedule is vetted first; ok lifts the taint, flag or failed quarantines it, inconclusive keeps it pending; needs nodes get, patch, patch nodes/status")
	fl.Int("pending-retries", d.Kubernetes.PendingRetries, "backend kubernetes: undecided runs in a row a pending node gets before the run says it needs a person (it stays pending)")
	fl.Bool("only-due", false, "backend kubernetes: vet only nodes that are due: pending, their verdict expired, or none")
	fl.Duration("verdict-valid-for", d.Kubernetes.VerdictValidFor.D(), "backend kubernetes: how long a node's verdict holds (annotation "+k8s.AnnotationValidUntil+"); past it the node is due (0: no expiry)")
	fl.String("max-unhealthy", d.Kubernetes.MaxUnhealthy, "backend kubernetes: circuit breaker: the most nodes one run may quarantine, a count (5) or a share of the nodes vetted (10%); past it the rest are only reported and the run fails")
	fl.Bool("dry-run", false, "backends kubernetes and slurm: vet, but take no action on any node (labels, taints, condition; drains, resumes): print and record each one it would take")
	fl.String("priority-class", "", "backend kubernetes: the PriorityClass of the pods a run creates (a low one lets real work preempt a vetting run; docs/acceptance.md)")
	fl.Bool("cache-owner-init", d.Kubernetes.CacheOwnerInit, "backend kubernetes: the populate Job's root init container that chowns the cache volume's root (false where root containers are refused; the StorageClass must then apply fsGroup)")
}

// openKubernetes checks the forms only the Kubernetes libraries read and connects to the cluster
// (errors: bad input, before anything is created).
func openKubernetes(plan *config.Plan) (fleet.Backend, func(), error) {
	c := plan.Config
	kc := c.Kubernetes
	tols, err := k8s.ParseTolerations(strings.Join(kc.Tolerations, ","))
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes.tolerations (%s): %v", plan.Source("kubernetes.tolerations"), err)
	}
	if err := k8s.CheckSelector(kc.NodeSelector); err != nil {
		return nil, nil, fmt.Errorf("kubernetes.node_selector (%s): %v", plan.Source("kubernetes.node_selector"), err)
	}
	hargs, err := splitArgs(kc.HealthArgs)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes.health_args (%s): %v", plan.Source("kubernetes.health_args"), err)
	}
	maxUnhealthy, err := fleet.ParseMaxUnhealthy(kc.MaxUnhealthy)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes.max_unhealthy (%s): %v", plan.Source("kubernetes.max_unhealthy"), err)
	}
	cl, err := k8s.ConnectWith(kc.Kubeconfig, kc.Context, kubeLimits(kc))
	if err != nil {
		return nil, nil, err
	}
	return &k8s.Fleet{Cluster: cl, Config: c, Plan: plan, Options: k8s.Options{
		Image: kc.Image, EngineImage: kc.EngineImage,
		PriorityClass: kc.PriorityClass,
		Selection:     k8s.Selection{Selector: kc.NodeSelector, Tolerations: tols, Max: kc.Nodes, OnlyDue: kc.OnlyDue},
		ParallelNodes: kc.ParallelNodes, KeepOnFailure: kc.KeepOnFailure, CacheSize: cacheSize(c.ModelCache),
		CacheAccess: c.ModelCache.AccessMode, StorageClass: kc.StorageClass, HealthArgs: hargs,
		JobTimeout: kc.JobTimeout.D(), Dynamo: kc.Dynamo, DynamoService: kc.DynamoTarget == config.DynamoTargetService,
		HubEndpoint: c.ModelCache.Endpoint, CacheOwnerInit: kc.CacheOwnerInit, CacheNamespace: kc.CacheNamespace, CacheNamespaceAllowExisting: kc.CacheNamespaceAllowExisting,
	}, Verdicts: k8s.Verdicts{Label: kc.LabelNodes, TaintFailed: kc.TaintFailed, TaintFlagged: kc.TaintFlagged, Gate: kc.Gate,
		DryRun: kc.DryRun, MaxUnhealthy: maxUnhealthy, ValidFor: kc.VerdictValidFor.D(), PendingRetries: kc.PendingRetries}}, func() {}, nil
}

// cleanKubernetes deletes every gpuvet namespace (or one run's), what runs left in the kept cache's
// namespace, with --cache the cache itself, and the manifests of this cluster.
func cleanKubernetes(ctx context.Context, req cleanRequest, ms []*fleet.Manifest) error {
	kc := req.plan.Config.Kubernetes
	cl, err := k8s.ConnectWith(kc.Kubeconfig, kc.Context, kubeLimits(kc))
	if err != nil {
		return usageErr("%v", err)
	}
	out := req.cmd.OutOrStdout()
	if req.untaint { // before anything is deleted: a missing permission is the user's to fix (exit 2)
		if err := k8s.CheckAccess(ctx, cl.Client, "", "", k8s.UntaintNeeds()); err != nil {
			return usageErr("--untaint: %v", err)
		}
	}
	done, err := k8s.Clean(ctx, cl, req.runID, req.cache, 5*time.Minute)
	for _, what := range done {
		fmt.Fprintf(out, "deleted %s\n", what)
	}
	if err != nil {
		return failedErr("clean: %v", err)
	}
	if len(done) == 0 {
		fmt.Fprintln(out, "nothing to clean: no gpuvet namespace in", cl.Context)
	}
	if req.untaint {
		lifted, err := k8s.Untaint(ctx, cl.Client, req.runID)
		for _, what := range lifted {
			fmt.Fprintln(out, what)
		}
		if err != nil {
			return failedErr("clean --untaint: %v", err)
		}
		if len(lifted) == 0 {
			fmt.Fprintf(out, "no %s taint to lift in %s\n", k8s.TaintUnhealthy, cl.Context)
		}
	}
	// Every object of a run lives in its namespace or is labelled with it in the cache's: once
	// both are cleaned on this cluster, none of the run's objects is left.
	var here []*fleet.Manifest
	for _, m := range ms {
		if m.Target["server"] == cl.Server {
			here = append(here, m)
		}
	}
	if err := finishManifests(here, func(fleet.Object) bool { return true }); err != nil {
		return failedErr("manifests: %v", err)
	}
	return nil
}

// kubeLimits are kubernetes.qps and kubernetes.burst as the client's rate limits.
func kubeLimits(kc config.Kubernetes) k8s.Limits {
	return k8s.Limits{QPS: float32(kc.QPS), Burst: kc.Burst}
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
