package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// kubeConnect is the cluster `gpuvet clean` connects to (--kubeconfig, --context); `gpuvet run`
// reads the same flags as the keys kubernetes.kubeconfig and kubernetes.context.
var kubeConnect struct{ kubeconfig, context string }

func registerKubeConnectFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&kubeConnect.kubeconfig, "kubeconfig", "", "backend kubernetes: kubeconfig file (kubernetes.kubeconfig; default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.StringVar(&kubeConnect.context, "context", "", "backend kubernetes: kubeconfig context (kubernetes.context; default: the current one)")
}

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
}

// registerKubeFlags adds the Kubernetes flags to a command that resolves a plan (run, config show).
// Their values are read through the plan; the defaults shown are the keys' (config.Defaults).
func registerKubeFlags(cmd *cobra.Command) {
	d := config.Defaults()
	fl := cmd.Flags()
	registerKubeConnectFlags(cmd)
	fl.String("node-selector", "", "backend kubernetes: only nodes matching this label selector, e.g. nvidia.com/gpu.product=NVIDIA-H200")
	fl.String("tolerations", "", "backend kubernetes: taints to tolerate: key[=value][:effect],… (* tolerates all)")
	fl.Int("nodes", d.Kubernetes.Nodes, "backend kubernetes: vet at most N GPU nodes (0: all with a free GPU)")
	fl.Int("parallel-nodes", d.Kubernetes.ParallelNodes, "backend kubernetes: how many nodes run at once")
	fl.String("image", "", "backend kubernetes: gpuvet's own image for the in-cluster Jobs (see docs/kubernetes.md: ko build)")
	fl.String("engine-image", "", "backend kubernetes: the engine image (default vllm/vllm-openai:v<engine.version>)")
	fl.String("cache-size", d.ModelCache.Size, "backend kubernetes: model-cache PVC size, or off (model_cache.size)")
	fl.String("cache-access-mode", d.ModelCache.AccessMode, "backend kubernetes: model-cache PVC access: auto, ReadWriteOnce (one per node) or ReadWriteMany (one shared)")
	fl.String("storage-class", "", "backend kubernetes: StorageClass of the model cache (default: the cluster's default)")
	fl.String("health-args", "", "backend kubernetes: extra arguments for `gpuvet health` in each node's health Job, e.g. '--burn 60s'")
	fl.Bool("keep-on-failure", false, "backend kubernetes: keep the run's namespace when something failed")
	fl.Duration("job-timeout", d.Kubernetes.JobTimeout.D(), "backend kubernetes: limit for each in-cluster gpuvet Job")
	fl.Bool("dynamo", false, "backend kubernetes: serve through a DynamoGraphDeployment (needs the dynamographdeployments.nvidia.com CRD)")
	fl.String("hub-endpoint", "", "the hub (or mirror) the model cache is filled from (model_cache.endpoint; default $HF_ENDPOINT, else "+modelcache.DefaultEndpoint+")")
	fl.Bool("cache-owner-init", d.Kubernetes.CacheOwnerInit, "backend kubernetes: the populate Job's root init container that chowns the cache volume's root (false where root containers are refused; the StorageClass must then apply fsGroup)")
}

// The Kubernetes flags join `gpuvet run` and `gpuvet config show` here, so run.go stays
// backend-neutral (run.go's and config.go's init run first).
func init() {
	for k, v := range kubeFlagPaths {
		flagPaths[k] = v
	}
	for _, c := range root.Commands() {
		switch c.Name() {
		case "run":
			registerKubeFlags(c)
		case "config":
			for _, sc := range c.Commands() {
				if sc.Name() == "show" {
					registerKubeFlags(sc)
				}
			}
		}
	}
	cleaners["kubernetes"] = cleanKubernetes
}

// runKubernetes is `gpuvet run --backend kubernetes`: the fleet of GPU nodes, one summary.
func runKubernetes(cmd *cobra.Command, plan *config.Plan) error {
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	say := func(format string, a ...any) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	kc := plan.Config.Kubernetes
	// The forms only the Kubernetes libraries read are checked here, before anything is created.
	tols, err := k8s.ParseTolerations(strings.Join(kc.Tolerations, ","))
	if err != nil {
		return usageErr("kubernetes.tolerations (%s): %v", plan.Source("kubernetes.tolerations"), err)
	}
	if err := k8s.CheckSelector(kc.NodeSelector); err != nil {
		return usageErr("kubernetes.node_selector (%s): %v", plan.Source("kubernetes.node_selector"), err)
	}
	hargs, err := splitArgs(kc.HealthArgs)
	if err != nil {
		return usageErr("kubernetes.health_args (%s): %v", plan.Source("kubernetes.health_args"), err)
	}
	cl, err := k8s.Connect(kc.Kubeconfig, kc.Context)
	if err != nil {
		return usageErr("%v", err)
	}
	// The in-cluster Jobs get the plan without what only this machine uses (the kubeconfig path).
	podCfg := plan.Config
	podCfg.Kubernetes = config.Defaults().Kubernetes
	podCfg.Kubernetes.Image = kc.Image
	planYAML, err := yaml.Marshal(podCfg)
	if err != nil {
		return failedErr("plan: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	base := newFleetSummary(plan)
	say("run %s: backend kubernetes, context %s (%s)", base.RunID, cl.Context, cl.Server)
	r, err := k8s.Prepare(ctx, cl, plan.Config, planYAML, k8s.Options{
		RunID: base.RunID, Image: kc.Image, EngineImage: kc.EngineImage,
		Selection:     k8s.Selection{Selector: kc.NodeSelector, Tolerations: tols, Max: kc.Nodes},
		ParallelNodes: kc.ParallelNodes, KeepOnFailure: kc.KeepOnFailure, CacheSize: cacheSize(plan.Config.ModelCache),
		CacheAccess: plan.Config.ModelCache.AccessMode, StorageClass: kc.StorageClass, HealthArgs: hargs,
		JobTimeout: kc.JobTimeout.D(), Dynamo: kc.Dynamo, Progress: say,
		HubEndpoint: plan.Config.ModelCache.Endpoint, CacheOwnerInit: kc.CacheOwnerInit,
	})
	if err != nil {
		return usageErr("%v", err)
	}
	for _, n := range r.Nodes() {
		say("node %s: %d free of %d nvidia.com/gpu %s", n.Name, n.Free, n.Allocatable, n.Product)
	}
	for _, s := range r.Skipped() {
		say("node %s skipped: %s", s.Name, s.Reason)
	}
	say("%s", r.CacheNote())
	outs, execErr := r.Execute(ctx)
	if outs == nil && execErr != nil {
		return failedErr("%v", execErr)
	}
	s := fleet.Merge(base, outs, r.Skipped(), kc.ParallelNodes)
	jc := judge.FromPlan(plan, nil)
	judge.CompareNodes(s, jc.LLMGuardsFrom(), jc.GEMMGuardsFrom())
	if execErr != nil {
		s.Caveats = append(s.Caveats, execErr.Error())
	}
	if err := judge.Judge(s, plan); err != nil {
		s.Error = "judge: " + err.Error()
	}
	s.FinishedAt = time.Now().UTC()
	s.Complete = ctx.Err() == nil
	if ctx.Err() != nil {
		s.Error = strings.TrimPrefix(s.Error+"; interrupted: results are partial", "; ")
		s.Status = results.StatusFailed
	}
	out := plan.Config.Output.Dir
	path := filepath.Join(out, "summary.json")
	if err := results.WriteJSON(path, s); err != nil {
		return failedErr("writing %s: %v", path, err)
	}
	if err := report.WriteDir(s, out, plan.Config.Output.HTML, plan.Config.Output.JUnit, plan.Config.Output.Prometheus); err != nil {
		say("report: %v", err)
	}
	pipeline.Render(cmd.OutOrStdout(), s)
	fmt.Fprintln(cmd.OutOrStdout(), "\n"+pipeline.Describe(&pipeline.Result{Summary: s, SummaryPath: path}))
	if judge.ExitCode(s, plan.Config.Run.FailOnFlag, plan.Config.Run.FailOnInconclusive) != exitOK {
		return failedErr("run status %s (see %s)", s.Status, path)
	}
	return nil
}

// newFleetSummary is the fleet summary's identity: run id, tool, plan meta.
func newFleetSummary(plan *config.Plan) *results.Summary {
	now := time.Now().UTC()
	cfg := plan.Config
	lc := cfg.LoadConfig()
	env := cfg.Environment
	if plan.Source("environment") == "" || strings.HasPrefix(plan.Source("environment"), "default") {
		env = "k8s"
	}
	return &results.Summary{
		SchemaVersion: results.SchemaVersion, Tool: results.Tool{Name: "gpuvet", Version: version()},
		RunID: results.NewRunID(now), StartedAt: now, Backend: "kubernetes", Environment: env,
		Meta: results.Meta{Models: cfg.Models, LoadProfile: &lc, Thresholds: config.Thresholds(cfg, plan.Sources),
			ParallelGPUs: cfg.Run.ParallelGPUs, Settings: plan.Settings(), Engine: cfg.Engine.Kind},
		Status: results.StatusOK,
	}
}

// cleanKubernetes deletes every gpuvet namespace (or one run's) and the manifests they leave.
func cleanKubernetes(ctx context.Context, cmd *cobra.Command, runID string, ms []*fleet.Manifest) error {
	kc, kctx := kubeConnect.kubeconfig, kubeConnect.context
	if cleanPlan != nil { // flags left out: kubernetes.kubeconfig/context from -c, --set, GPUVET_*
		if !cmd.Flags().Changed("kubeconfig") {
			kc = cleanPlan.Config.Kubernetes.Kubeconfig
		}
		if !cmd.Flags().Changed("context") {
			kctx = cleanPlan.Config.Kubernetes.Context
		}
	}
	cl, err := k8s.Connect(kc, kctx)
	if err != nil {
		return usageErr("%v", err)
	}
	done, err := k8s.Clean(ctx, cl.Client, runID, 5*time.Minute)
	for _, ns := range done {
		fmt.Fprintf(cmd.OutOrStdout(), "deleted namespace %s\n", ns)
	}
	if err != nil {
		return failedErr("clean: %v", err)
	}
	if len(done) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "nothing to clean: no gpuvet namespace in", cl.Context)
	}
	// Every object of a run lives in its namespace: once no labelled namespace is left on this
	// cluster, none of the run's objects is.
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
