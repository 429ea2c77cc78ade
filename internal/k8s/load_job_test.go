package k8s

import (
	"reflect"
	"slices"
	"testing"
)

// A node's load Job gets the node's resolved settings once: one plan, the run's with the slot's
// load profile as the pipeline resolved it for the node's GPU (here an accelerators entry), and no
// --set after it. Before, the Job got the run's plan, then a --set diff of the load section, then
// (Dynamo) a second writer of load.concurrency ("the last --set wins").
func TestLoadJobGetsTheNodesResolvedPlan(t *testing.T) {
	h := healthPlan(t, "load: {concurrency: 2, max_concurrency: 8}\n"+
		"accelerators:\n  H200:\n    load: {seed: 4242, concurrency: 3, max_concurrency: 12}\n")
	cfg, _, key := h.r.plan.ForGPU("NVIDIA H200") // what the node's pipeline resolves for its GPUs
	if key != "H200" || cfg.Load.Seed != 4242 || cfg.Load.Concurrency != 3 {
		t.Fatalf("the node's settings: accelerators entry %q, load %+v", key, cfg.Load)
	}
	plan, err := h.r.loadPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	args := h.loadJob(&nodeServed{job: "load-0-0-0", plan: plan}, "http://10.0.0.7:8000", "Qwen/Qwen3-8B").Spec.Template.Spec.Containers[0].Args
	if i := slices.Index(args, "--plan"); i < 0 || args[i+1] != plan || slices.Contains(args, "--set") {
		t.Fatalf("the load Job's arguments: %q\n want one --plan (the node's) and no --set", args)
	}
	want := []string{"run", "--backend", "endpoint", "--url", "http://10.0.0.7:8000", "--model", "Qwen/Qwen3-8B", "--out", "out"}
	if sub := args[slices.Index(args, "--")+1:]; !slices.Equal(sub, want) {
		t.Errorf("the load Job runs %q\n want %q", sub, want)
	}
	p := podPlan(t, plan)
	if !reflect.DeepEqual(p.Config.Load, cfg.Load) {
		t.Errorf("the load Job's plan has load\n %+v\n want the node's\n %+v", p.Config.Load, cfg.Load)
	}
	// Health is the health Job's, history the fleet's merge's; the entry is applied, not sent again.
	if p.Config.Health.Enabled || p.Config.History.Enabled || len(p.Config.Accelerators) != 0 {
		t.Errorf("the load Job's plan: health %v, history %v, accelerators %v", p.Config.Health.Enabled, p.Config.History.Enabled, p.Config.Accelerators)
	}
	// Its engine is a pod of the Job's node: the Job reads the node's CPU pressure over each rung.
	if !p.Config.Endpoint.SameHost {
		t.Error("the load Job's plan does not say its engine shares the Job's node (endpoint.same_host)")
	}

	// A Dynamo frontend over 4 GPUs loads at their summed concurrency, in the same one plan.
	fp, err := h.r.frontendPlan(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	want4 := cfg.Load
	want4.Concurrency, want4.MaxConcurrency = 12, 48
	if got := podPlan(t, fp).Config.Load; !reflect.DeepEqual(got, want4) {
		t.Errorf("the frontend's load Job plan has load\n %+v\n want\n %+v", got, want4)
	}
}
