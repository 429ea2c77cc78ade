package k8s_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 29: a Kubernetes node runs the host pipeline, not a copy of it, so what the host pipeline
// does per GPU reaches a node: an accelerators entry for the node's GPU sets its engine pods' command
// line (the copy served every node with the plan's engine settings), the endpoint has its
// speed-of-light bound (the copy's load Job knew no GPU), the time to vet's serve phase spans the
// engine pod's start, and the load's telemetry record says why nothing was sampled; the entry's
// load settings reach the load Job (the Job's own run knows no GPU: they are in its plan, resolved here).
func TestKubernetesNodeRunsHostPipeline(t *testing.T) {
	e := setup(t)
	e.standIn(t, nil)
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(plan, []byte("accelerators:\n  H200:\n    engine:\n      extra_args: [\"--max-num-seqs\", \"48\"]\n    load:\n      seed: 4242\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The engine pods' command lines, watched while the run goes.
	var mu sync.Mutex
	cmds := map[string]string{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			pods, err := e.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelRole + "=" + k8s.RoleEngine})
			if err == nil {
				mu.Lock()
				for _, p := range pods.Items {
					c := p.Spec.Containers[0]
					cmds[p.Name] = strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	out, state := t.TempDir(), t.TempDir()
	log, code := e.gpuvetEnv(t, state, []string{"GPUVET_MODEL_CACHE=off"}, e.runArgs(out, append(small, "-c", plan)...)...)
	close(stop)
	<-done
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 2 {
		t.Fatalf("%d hosts", len(s.Hosts))
	}
	mu.Lock()
	if len(cmds) != 2 {
		t.Errorf("saw %d engine pods, want one per node: %v", len(cmds), cmds)
	}
	for p, c := range cmds {
		if !strings.Contains(c, "--max-num-seqs 48") {
			t.Errorf("engine pod %s runs %q: the accelerators entry for H200 did not reach it", p, c)
		}
	}
	mu.Unlock()
	caveats := strings.Join(s.Caveats, "\n")
	for _, h := range s.Hosts {
		if h.Error != "" || len(h.Models) != 1 || len(h.Models[0].Endpoints) != 1 {
			t.Fatalf("host %s: error %q, %d models", h.Name, h.Error, len(h.Models))
		}
		if !strings.Contains(caveats, h.Name+`: gpu [0] (NVIDIA H200): accelerator override "H200" applied`) {
			t.Errorf("no accelerator caveat for %s in %q", h.Name, s.Caveats)
		}
		m := h.Models[0]
		if !strings.Contains(m.Engine.Command, "--max-num-seqs 48") {
			t.Errorf("%s: engine command %q", h.Name, m.Engine.Command)
		}
		ep := m.Endpoints[0]
		if ep.Error != "" || ep.Load == nil {
			t.Fatalf("%s: endpoint error %q", h.Name, ep.Error)
		}
		if ep.Load.Config.Seed != 4242 { // the load Job ran the GPU's load profile, not the plan's
			t.Errorf("%s: the load ran with seed %d, want the accelerators entry's 4242", h.Name, ep.Load.Config.Seed)
		}
		if sol := ep.SpeedOfLight; sol == nil || sol.BoundOutputTokS <= 0 || sol.GPU == "" {
			t.Errorf("%s: speed of light %+v, want the bound of the node's GPU", h.Name, sol)
		}
		if ep.Timing == nil || ep.Timing.ServeSeconds < ep.ProvisionSeconds || ep.Timing.LoadSeconds <= 0 {
			t.Errorf("%s: timing %+v, provision %.1fs: the serve phase must span the engine pod's start", h.Name, ep.Timing, ep.ProvisionSeconds)
		}
		if ep.Telemetry == nil || !strings.Contains(ep.Telemetry.Note, "no GPU telemetry from outside the node") {
			t.Errorf("%s: telemetry %+v, want the reason nothing was sampled", h.Name, ep.Telemetry)
		}
	}
	e.assertNothingLeft(t, state)
}
