package k8s

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/inpod"
	"github.com/gpuvet/gpuvet/internal/results"
)

// healthPlan is a plan as `gpuvet run` resolves it, with extra YAML, and the run and node that
// carry it to a node's health Job (8 free GPUs, kubernetes.health_args hargs).
func healthPlan(t *testing.T, extra string, hargs ...string) *nodeHost {
	t.Helper()
	f := filepath.Join(t.TempDir(), "gpuvet.yaml")
	if err := os.WriteFile(f, []byte("backend: kubernetes\nkubernetes: {image: gpuvet:test}\nmodels: [Qwen/Qwen3-8B]\n"+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(config.Options{Files: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{opt: Options{RunID: "r1", Image: "img", HealthArgs: hargs}, plan: p}
	return &nodeHost{r: r, node: Node{Name: "n1", Free: 8}, index: 0}
}

// The health Job carries the node's resolved plan, as the load Job does: before, it ran `gpuvet
// health` with only --expect-gpus and kubernetes.health_args, and a floor the plan set never reached
// the node; then it got the run's plan plus a --set diff of the node's settings. Now the one plan
// holds them, and the command line after it sets nothing.
func TestHealthJobCarriesThePlan(t *testing.T) {
	h := healthPlan(t, "reference_floors:\n  H200: {gemm_bf16: 1.4}\nhealth: {burn: 30s}\n", "--sim", "--burn", "5s")
	cfg := h.r.plan.Config
	cfg.Health.AllowBusy = true // the node's resolved settings, unlike the plan's
	cfg.Run.ParallelGPUs, cfg.Run.Baseline = 1, "base.json"
	j, err := h.healthJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := j.Spec.Template.Spec.Containers[0]
	args := c.Args
	i := slices.Index(args, "--plan")
	if i < 0 || args[0] != "in-pod" {
		t.Fatalf("the health Job gets no plan: %q", args)
	}
	// The plan in the Job is the node's: the run's, reference_floors included, with its own settings.
	p := podPlan(t, args[i+1])
	if got := p.Config.ReferenceFloors["H200"]["gemm_bf16"]; got != 1.4 || p.Config.Health.Burn.D().Seconds() != 30 {
		t.Errorf("the health Job's plan: reference_floors %v, burn %s", p.Config.ReferenceFloors, p.Config.Health.Burn)
	}
	if !p.Config.Health.AllowBusy || p.Config.Run.ParallelGPUs != 1 || p.Config.Run.Baseline != "" {
		t.Errorf("the health Job's plan lacks the node's settings: allow_busy %v, parallel_gpus %v, baseline %q",
			p.Config.Health.AllowBusy, p.Config.Run.ParallelGPUs, p.Config.Run.Baseline)
	}
	sub := args[slices.Index(args, "--")+1:]
	want := []string{"health", "--out", "health.json", "--expect-gpus", "8", "--sim", "--burn", "5s"} // health_args last: they win
	if !slices.Equal(sub, want) {
		t.Errorf("the health Job runs %q\n want %q", sub, want)
	}
	if q := c.Resources.Limits[GPUResource]; q.Value() != 8 || j.Labels[LabelRole] != RoleHealth {
		t.Errorf("the health Job holds %s GPUs, role %q", q.String(), j.Labels[LabelRole])
	}
}

// podPlan is a Job's --plan as the pod loads it (in-pod writes it to a file for -c).
func podPlan(t *testing.T, arg string) *config.Plan {
	t.Helper()
	yml, err := base64.StdEncoding.DecodeString(arg)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(f, yml, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(config.Options{Files: []string{f}})
	if err != nil {
		t.Fatalf("the Job's plan does not load: %v\n%s", err, yml)
	}
	return p
}

// A floor in the plan changes the node's health verdict: the health Job's own command line, run
// with gpuvet (as the node's container would, on the simulator's GPUs), flags every GPU under
// reference_floors' gemm_bf16 floor the simulated H200 cannot reach, and passes them without it.
func TestHealthJobJudgesWithThePlansFloors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpuvet")
	}
	bin := BuiltGpuvet(t)
	hargs := []string{"--sim", "--sim-count", "8", "--dcgm=false"}
	for _, c := range []struct {
		name, plan string
		want       results.Status
	}{
		{"plan without a floor", "", results.StatusOK},
		{"plan with an unreachable floor", "reference_floors:\n  H200: {gemm_bf16: 1.4}\n", results.StatusFlag},
	} {
		h := healthPlan(t, c.plan, hargs...)
		j, err := h.healthJob(h.r.plan.Config)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, j.Spec.Template.Spec.Containers[0].Args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: the health Job's command: %v\n%s", c.name, err, out)
		}
		b, err := ExtractResult(out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		var hr results.Health
		if err := json.Unmarshal(b, &hr); err != nil {
			t.Fatal(err)
		}
		floors := 0
		for _, g := range hr.GPUs {
			for _, fl := range g.Flags {
				if fl.Check == "health.datasheet_floor" && strings.Contains(fl.Reason, "gemm_bf16") && strings.Contains(fl.Reason, "1.40 floor") {
					floors++
				}
			}
		}
		if hr.Status != c.want || len(hr.GPUs) != 8 || (c.want == results.StatusFlag) != (floors == 8) {
			t.Errorf("%s: health %s (want %s), %d GPUs, %d flagged under the plan's gemm_bf16 floor\n%s", c.name, hr.Status, c.want, len(hr.GPUs), floors, out)
		}
	}
}

// A Job whose image is an older gpuvet than the controller refuses a plan key it does not know and
// leaves no result; the error names the cause and the fix, not only "no gpuvet result in the log".
// The log is the real binary's, run as the load Job's container runs it, with a plan that carries a
// key this binary does not know (as a newer controller's would).
func TestJobOfAnOlderImageSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpuvet")
	}
	bin := BuiltGpuvet(t)
	plan := base64.StdEncoding.EncodeToString([]byte("load:\n  a_knob_from_a_newer_release: 3\n"))
	args := inpod.Command(plan, "out/summary.json", "run", "--backend", "endpoint", "--url", "http://127.0.0.1:1", "--model", "m", "--out", "out")
	log, err := exec.Command(bin, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("the Job's command succeeded with a key it cannot know:\n%s", log)
	}
	if _, xerr := ExtractResult(log); xerr == nil {
		t.Fatalf("a result in the log of a refused plan:\n%s", log)
	}
	if h := skewHint(log); !strings.Contains(h, "older gpuvet release") {
		t.Fatalf("no version-skew hint for the log:\n%s", log)
	}
	if h := skewHint([]byte("gpuvet: endpoint http://127.0.0.1:1 does not answer")); h != "" {
		t.Fatalf("a hint for a log without an unknown key: %s", h)
	}
}
