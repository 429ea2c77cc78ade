package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// auto loads every engine at once when the free cores carry them all within the budget, fewer when
// they do not (at least one), and says which figures decided; a count the plan gives is kept.
func TestChooseParallel(t *testing.T) {
	in := ParallelInputs{Slots: 8, FreeCores: 16, CoresSource: "affinity 16 CPUs", TokenCostUs: 20, CostSource: "measured",
		DemandTokS: 30000, DemandSrc: "roofline"}
	c := ChooseParallel(config.AutoGPUs, in) // 0.6 core per engine; 8 cores budget: 13 fit
	if c.Mode != "auto" || c.GPUs != 8 || !strings.Contains(c.Reason, "all 8 engines at once") || c.CoresPerGPU != 0.6 {
		t.Errorf("16 cores: %+v", c)
	}
	in.FreeCores = 2 // 1 core of budget: one engine
	c = ChooseParallel(config.AutoGPUs, in)
	if c.GPUs != 1 || !strings.Contains(c.Reason, "1 of 8 engines") || !strings.Contains(c.Reason, "more cores") {
		t.Errorf("2 cores: %+v", c)
	}
	in.FreeCores = 6 // 3 cores: 5 engines
	if c = ChooseParallel(config.AutoGPUs, in); c.GPUs != 5 {
		t.Errorf("6 cores: %d at once, want 5", c.GPUs)
	}
	in.FreeCores = 0.5 // less than one engine's share: still one at a time, never none
	if c = ChooseParallel(config.AutoGPUs, in); c.GPUs != 1 {
		t.Errorf("half a core: %d at once, want 1", c.GPUs)
	}
	if c = ChooseParallel(3, in); c.Mode != "fixed" || c.GPUs != 3 || !strings.Contains(c.Reason, "run.parallel_gpus = 3") {
		t.Errorf("fixed 3: %+v", c)
	}
	in.Slots = 2
	if c = ChooseParallel(4, in); c.GPUs != 2 {
		t.Errorf("4 at once with 2 engines: %d, want 2", c.GPUs)
	}
	if c = ChooseParallel(config.AutoGPUs, ParallelInputs{Slots: 1}); c.GPUs != 1 || !strings.Contains(c.Reason, "1 engine") {
		t.Errorf("one engine: %+v", c)
	}
}

// The cores free to gpuvet are the fewest of its affinity mask and every cgroup quota above it,
// v2 and v1; a limit that cannot be read or is "max" is no limit.
func TestCgroupQuota(t *testing.T) {
	write := func(root, rel, s string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(s), 0o644)
	}
	v2 := t.TempDir()
	write(v2, "proc/self/cgroup", "0::/kubepods/pod1/ctr\n")
	write(v2, "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n")
	write(v2, "sys/fs/cgroup/kubepods/pod1/cpu.max", "350000 100000\n")
	write(v2, "sys/fs/cgroup/kubepods/cpu.max", "800000 100000\n")
	if q, where := cgroupQuota(v2); q != 3.5 || where != "cgroup cpu.max" {
		t.Errorf("v2: %v from %q, want 3.5 (the pod's, the tightest)", q, where)
	}
	v1 := t.TempDir()
	write(v1, "proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
	write(v1, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n")
	write(v1, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
	if q, _ := cgroupQuota(v1); q != 1.5 {
		t.Errorf("v1: %v, want 1.5", q)
	}
	none := t.TempDir()
	write(none, "proc/self/cgroup", "0::/\n")
	write(none, "sys/fs/cgroup/cpu.max", "garbage")
	if q, _ := cgroupQuota(none); q != 0 {
		t.Errorf("unreadable cpu.max: %v, want 0 (no limit)", q)
	}
	if q, _ := cgroupQuota(filepath.Join(none, "missing")); q != 0 {
		t.Errorf("no /proc: %v", q)
	}
	cores, src := freeCores(v2)
	if cores > 3.5 || !strings.Contains(src, "affinity") || !strings.Contains(src, "cgroup cpu.max 3.50") {
		t.Errorf("free cores with a 3.5-core quota: %v (%s)", cores, src)
	}
}

// The demand of one engine is the roofline bound at the batch the knee search can reach; a GPU or
// model the catalog does not know gets the stated assumption.
func TestDemandTokS(t *testing.T) {
	c := config.Defaults()
	c.Backend, c.Sim.MaxNumSeqs = "sim", 256
	v, src := demandTokS(nil, "NVIDIA H200", c)
	if v < 10000 || v > 100000 || !strings.Contains(src, "batch 256") {
		t.Errorf("H200 × Qwen3-8B at 256: %.0f tok/s (%s)", v, src)
	}
	c.Sim.MaxNumSeqs = 32
	if small, _ := demandTokS(nil, "NVIDIA H200", c); small >= v {
		t.Errorf("batch 32 bound %.0f not below batch 256's %.0f", small, v)
	}
	c.Models = []string{"/no/such/model"}
	if v, src := demandTokS(nil, "NVIDIA H200", c); v != unknownDemandTokS || !strings.Contains(src, "assumed") {
		t.Errorf("unknown model: %.0f (%s)", v, src)
	}
}

// A run records what it chose and why, its time-to-vet per phase and per engine, and says both on
// the terminal.
func TestRunRecordsChoiceAndTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	// The synchronous rung alone: the choice and the timing are under test, not the sweep (60 s
	// with it, two runs).
	p := quick(t, "run.parallel_gpus=auto", "load.profile=synchronous")
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := results.Read(res.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Meta.Parallel
	if c == nil || c.Mode != "auto" || c.Slots != 2 || c.GPUs < 1 || c.TokenCostUs <= 0 || c.FreeCores <= 0 || s.Meta.ParallelGPUs != c.GPUs || c.Reason == "" {
		t.Fatalf("choice not recorded: %+v", c)
	}
	if s.Timing == nil || s.Timing.TotalSeconds <= 0 {
		t.Fatalf("no timing: %+v", s.Timing)
	}
	var phases []string
	models := 0.0
	for _, ph := range s.Timing.Phases {
		phases = append(phases, ph.Phase)
		if ph.Phase == "models" {
			models = ph.Seconds
		}
	}
	if strings.Join(phases, ",") != "discover,health,models,baseline,judge" || models <= 0 || models > s.Timing.TotalSeconds {
		t.Errorf("phases %v (models %.1f s of %.1f s)", phases, models, s.Timing.TotalSeconds)
	}
	for _, e := range s.Hosts[0].Models[0].Endpoints {
		et := e.Timing
		if et == nil || et.LoadSeconds <= 0 || et.TotalSeconds < et.LoadSeconds+et.ServeSeconds || et.TotalSeconds > models+0.5 {
			t.Errorf("gpu %v timing %+v", e.GPUs, et)
		}
	}
	var sb strings.Builder
	term.Summary(&sb, s)
	out := sb.String()
	for _, want := range []string{"Time to vet", "total ", "models ", "GPUs at once: auto", "Qwen/Qwen3-8B on gpu 0: "} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal lacks %q:\n%s", want, out)
		}
	}
	// A count the plan gives is kept and said.
	p = quick(t, "run.parallel_gpus=1", "load.profile=synchronous")
	res, err = Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Summary.Meta.Parallel; c == nil || c.Mode != "fixed" || c.GPUs != 1 || res.Summary.Meta.ParallelGPUs != 1 {
		t.Errorf("fixed 1: %+v", c)
	}
}
