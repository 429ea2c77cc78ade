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
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// kubeFlags are `gpuvet run`'s flags for --backend kubernetes (and `gpuvet clean`'s connection).
type kubeFlags struct {
	kubeconfig, context, selector, tolerations, image, engineImage string
	cacheSize, storageClass, healthArgs                            string
	nodes, parallelNodes                                           int
	keepOnFailure                                                  bool
	jobTimeout                                                     time.Duration
}

var kube kubeFlags

func registerKubeConnectFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&kube.kubeconfig, "kubeconfig", "", "backend kubernetes: kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.StringVar(&kube.context, "context", "", "backend kubernetes: kubeconfig context (default: the current one)")
}

// The Kubernetes flags join `gpuvet run` here, so run.go stays backend-neutral (run.go's init runs first).
func init() {
	for _, c := range root.Commands() {
		if c.Name() != "run" {
			continue
		}
		registerKubeConnectFlags(c)
		fl := c.Flags()
		fl.StringVar(&kube.selector, "node-selector", "", "backend kubernetes: only nodes matching this label selector, e.g. nvidia.com/gpu.product=NVIDIA-H200")
		fl.StringVar(&kube.tolerations, "tolerations", "", "backend kubernetes: taints to tolerate: key[=value][:effect],… (* tolerates all)")
		fl.IntVar(&kube.nodes, "nodes", 0, "backend kubernetes: vet at most N GPU nodes (0: all with a free GPU)")
		fl.IntVar(&kube.parallelNodes, "parallel-nodes", 4, "multi-host backends: how many nodes run at once")
		fl.StringVar(&kube.image, "image", "", "backend kubernetes: gpuvet's own image for the in-cluster Jobs (see README: ko build)")
		fl.StringVar(&kube.engineImage, "engine-image", "", "backend kubernetes: the engine image (default vllm/vllm-openai:<engine.version>)")
		fl.StringVar(&kube.cacheSize, "cache-size", "100Gi", "backend kubernetes: model-cache PVC size per node, or off")
		fl.StringVar(&kube.storageClass, "storage-class", "", "backend kubernetes: StorageClass of the model cache (default: the cluster's default)")
		fl.StringVar(&kube.healthArgs, "health-args", "", "backend kubernetes: extra arguments for `gpuvet health` in each node's health Job, e.g. '--burn 60s'")
		fl.BoolVar(&kube.keepOnFailure, "keep-on-failure", false, "backend kubernetes: keep the run's namespace when something failed")
		fl.DurationVar(&kube.jobTimeout, "job-timeout", time.Hour, "backend kubernetes: limit for each in-cluster gpuvet Job")
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
	tols, err := k8s.ParseTolerations(kube.tolerations)
	if err != nil {
		return usageErr("%v", err)
	}
	switch {
	case kube.nodes < 0:
		return usageErr("--nodes %d: want 0 (all) or a positive count", kube.nodes)
	case kube.parallelNodes < 1:
		return usageErr("--parallel-nodes %d: want at least 1", kube.parallelNodes)
	}
	hargs, err := splitArgs(kube.healthArgs)
	if err != nil {
		return usageErr("--health-args: %v", err)
	}
	cl, err := k8s.Connect(kube.kubeconfig, kube.context)
	if err != nil {
		return usageErr("%v", err)
	}
	planYAML, err := yaml.Marshal(plan.Config)
	if err != nil {
		return failedErr("plan: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	base := newFleetSummary(plan)
	say("run %s: backend kubernetes, context %s (%s)", base.RunID, cl.Context, cl.Server)
	r, err := k8s.Prepare(ctx, cl, plan.Config, planYAML, k8s.Options{
		RunID: base.RunID, Image: kube.image, EngineImage: kube.engineImage,
		Selection:     k8s.Selection{Selector: kube.selector, Tolerations: tols, Max: kube.nodes},
		ParallelNodes: kube.parallelNodes, KeepOnFailure: kube.keepOnFailure, CacheSize: kube.cacheSize,
		StorageClass: kube.storageClass, HealthArgs: hargs, JobTimeout: kube.jobTimeout, Progress: say,
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
	outs, execErr := r.Execute(ctx)
	if outs == nil && execErr != nil {
		return failedErr("%v", execErr)
	}
	s := fleet.Merge(base, outs, r.Skipped(), kube.parallelNodes)
	jc := judge.FromPlan(plan, nil)
	fleet.CompareNodes(s, jc.LLMGuardsFrom(), jc.GEMMGuardsFrom())
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
	if judge.ExitCode(s, plan.Config.Run.FailOnFlag) != exitOK {
		return failedErr("run status %s (see %s)", s.Status, path)
	}
	return nil
}

// newFleetSummary is the fleet summary's identity: run id, tool, plan meta.
func newFleetSummary(plan *config.Plan) *results.Summary {
	now := time.Now().UTC()
	cfg := plan.Config
	lc := cfg.Load.LoadConfig()
	env := cfg.Environment
	if plan.Source("environment") == "" || strings.HasPrefix(plan.Source("environment"), "default") {
		env = "k8s"
	}
	return &results.Summary{
		SchemaVersion: results.SchemaVersion, Tool: results.Tool{Name: "gpuvet", Version: version()},
		RunID: now.Format("20060102T150405Z"), StartedAt: now, Backend: "kubernetes", Environment: env,
		Meta: results.Meta{Models: cfg.Models, LoadProfile: &lc, Thresholds: config.Thresholds(cfg, plan.Sources),
			ParallelGPUs: cfg.Run.ParallelGPUs, Settings: plan.Settings(), Engine: cfg.Engine.Kind},
		Status: results.StatusOK,
	}
}

// cleanKubernetes deletes every gpuvet namespace (or one run's) and the manifests they leave.
func cleanKubernetes(ctx context.Context, cmd *cobra.Command, runID string, ms []*fleet.Manifest) error {
	cl, err := k8s.Connect(kube.kubeconfig, kube.context)
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

// splitArgs splits a flag value into words with the engine template's quoting rules.
func splitArgs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return engine.SplitWords(s)
}
