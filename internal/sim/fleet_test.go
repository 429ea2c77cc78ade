package sim

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFleetInventory(t *testing.T) {
	f, err := NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := f.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, Seed: 9})
	gs2, _ := again.GPUs()
	uuid := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	for i, g := range gs {
		if g.Name != "NVIDIA H200" || g.Index != i || !uuid.MatchString(g.UUID) || g.UUID != gs2[i].UUID ||
			g.MemoryTotalMiB != 143769 || g.PCIe.GenMax != 5 || g.PCIe.WidthCurrent != 16 ||
			g.NUMANode != -1 || *g.PowerLimitW != 700 || g.ClockEvents.Mask != 0x1 {
			t.Errorf("gpu %d: %+v", i, g)
		}
	}
	if gs[0].UUID == gs[1].UUID {
		t.Error("UUIDs must differ between GPUs")
	}
}

func TestFleetMicrobench(t *testing.T) {
	f, _ := NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: 1, StragglerPct: 30, Seed: 1})
	// The H200 fixture's measured figures (fixtures/h200/README.md).
	for _, c := range []struct {
		name string
		want float64
		unit string
	}{
		{"sgemm_fp32", 54.1, "TFLOP/s"}, {"gemm_tf32", 455, "TFLOP/s"}, {"gemm_bf16", 783, "TFLOP/s"},
		{"pcie_h2d", 55.2, "GB/s"}, {"pcie_d2h", 55.2, "GB/s"}, {"hbm_d2d", 4105, "GB/s"},
	} {
		v, unit, err := f.Microbench(0, c.name)
		if err != nil || unit != c.unit || math.Abs(v-c.want)/c.want > 0.03 {
			t.Errorf("%s = %.1f %s (%v), want ≈ %.1f %s", c.name, v, unit, err, c.want, c.unit)
		}
		s, _, _ := f.Microbench(1, c.name)
		if r := s / v; r < 0.68 || r > 0.72 {
			t.Errorf("%s straggler/healthy = %.3f, want ≈ 0.7", c.name, r)
		}
	}
	if f.Speed(0) != 1 || f.Speed(1) != 0.7 {
		t.Errorf("speeds %v %v", f.Speed(0), f.Speed(1))
	}
	if _, _, err := f.Microbench(0, "nope"); err == nil {
		t.Error("unknown microbenchmark should fail")
	}
	if _, _, err := f.Microbench(5, "hbm_d2d"); err == nil {
		t.Error("GPU 5 of 2 should fail")
	}
	for _, bad := range []FleetConfig{{GPU: "H999", Count: 1, StragglerIndex: -1}, {GPU: "H100", Count: 0, StragglerIndex: -1},
		{GPU: "H100", Count: 2, StragglerIndex: 2}, {GPU: "H100", Count: 2, StragglerIndex: 0, StragglerPct: 100}} {
		if _, err := NewFleet(bad); err == nil {
			t.Errorf("%+v should fail", bad)
		}
	}
}

// A node slowdown slows every GPU by the same share, on top of a straggler's own (issue 47): the
// GPUs stay alike, so only the node's history sees it.
func TestFleetNodeSlowdown(t *testing.T) {
	base, _ := NewFleet(FleetConfig{GPU: "H200", Count: 3, StragglerIndex: 2, StragglerPct: 30, Seed: 1})
	slow, err := NewFleet(FleetConfig{GPU: "H200", Count: 3, StragglerIndex: 2, StragglerPct: 30, Seed: 1, NodeSlowdownPct: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.95, 0.95, 0.95 * 0.7} {
		if got := slow.Speed(i); math.Abs(got-want) > 1e-12 {
			t.Errorf("gpu %d speed %v, want %v", i, got, want)
		}
		a, _, _ := base.Microbench(i, "gemm_bf16")
		b, _, _ := slow.Microbench(i, "gemm_bf16")
		if r := b / a; math.Abs(r-0.95) > 1e-9 {
			t.Errorf("gpu %d GEMM slowed to %.4f of its healthy figure, want 0.95", i, r)
		}
	}
	if _, err := NewFleet(FleetConfig{GPU: "H200", Count: 1, StragglerIndex: -1, NodeSlowdownPct: 100}); err == nil {
		t.Error("a node 100 % slower should fail")
	}
}

// Load on a GPU's engine moves that GPU's power and temperature, and no other's.
func TestFleetPowerFollowsLoad(t *testing.T) {
	f, _ := NewFleet(FleetConfig{GPU: "H100", Count: 2, StragglerIndex: -1})
	s := start(t, Config{GPU: "H100", Model: "Qwen/Qwen3-8B", Fleet: f, GPUIndex: 1})
	f.Sample(0)
	f.Sample(1)
	gs, _ := f.GPUs()
	if *gs[0].MemoryUsedMiB != 0 || *gs[1].MemoryUsedMiB != int64(80*1024*0.9) {
		t.Errorf("memory used: idle GPU %d MiB, GPU with an engine %d MiB (want 0 and 90 %% of 80 GiB)", *gs[0].MemoryUsedMiB, *gs[1].MemoryUsedMiB)
	}
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, s.URL()+"/v1/completions", map[string]any{"prompt": strings.Repeat("load ", 400), "max_tokens": 40, "ignore_eos": true})
		}()
	}
	wg.Wait()
	idle, _ := f.Sample(0)
	busy, _ := f.Sample(1)
	if !(busy.PowerW > idle.PowerW+100 && busy.UtilPct > 50 && busy.TempC > idle.TempC && idle.ClockReasons == 0x1) {
		t.Errorf("idle GPU %+v, loaded GPU %+v", idle, busy)
	}
}

// The engine in wall time gives the same figures as in virtual time (one request, idle engine).
func TestRealtimeEngineMatchesVirtual(t *testing.T) {
	s := start(t, Config{GPU: "L40S", Model: "Qwen/Qwen2.5-3B-Instruct", Engine: EngineConfig{APIOverhead: time.Microsecond}})
	v := RunVirtual(s.perf, Workload{Concurrency: 1, Prompt: 512, Output: 32, Requests: 1})
	prompt := strings.Repeat("abcd", 512) // 512 tokens
	r := streamReq(t, s.URL()+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 32, "ignore_eos": true, "stream": true})
	ce := r.contentEvents()
	if len(ce) != 32 {
		t.Fatalf("%d tokens", len(ce))
	}
	total := ce[31].at
	want := v.E2E[0]
	// Wall time on a shared machine only adds delay; the engine must not run faster than its model.
	if total < want-2*time.Millisecond || total > 3*want {
		t.Errorf("32 tokens took %v in wall time, virtual time says %v", total, want)
	}
}

func TestRunEndpointsPerGPU(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out strings.Builder
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{Config: Config{GPU: "H100", Model: "Qwen/Qwen3-8B"}, GPUs: 2, Host: "127.0.0.1",
			StragglerIndex: -1, Out: lockedWriter{&mu, &out}})
	}()
	re := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/v1`)
	var urls [][]string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		urls = re.FindAllStringSubmatch(out.String(), -1)
		mu.Unlock()
		if len(urls) == 2 {
			break
		}
	}
	if len(urls) != 2 {
		t.Fatalf("want 2 endpoints, output: %s", out.String())
	}
	for _, u := range urls {
		r := streamReq(t, u[1]+"/v1/chat/completions", map[string]any{"model": "Qwen/Qwen3-8B",
			"messages": []any{map[string]any{"role": "user", "content": "hello"}}, "max_tokens": 4, "stream": true})
		if !r.done || len(r.contentEvents()) != 4 {
			t.Errorf("%s: done %v, %d tokens", u[1], r.done, len(r.contentEvents()))
		}
	}
	_, body := getBody(t, urls[1][1]+"/sim/gpus")
	var gs []map[string]any
	if err := json.Unmarshal(body, &gs); err != nil || len(gs) != 2 || gs[1]["name"] != "NVIDIA H100 80GB HBM3" {
		t.Errorf("/sim/gpus: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	for _, bad := range []RunOptions{
		{Config: Config{GPU: "H100", Model: "Qwen/Qwen3-8B", Engine: EngineConfig{TP: 3}}, GPUs: 4, StragglerIndex: -1},
		{Config: Config{GPU: "nope", Model: "Qwen/Qwen3-8B"}, GPUs: 1, StragglerIndex: -1},
		{Config: Config{GPU: "H100", Model: "nope/nope"}, GPUs: 1, StragglerIndex: -1},
		{Config: Config{GPU: "H100", Model: "meta-llama/Llama-3.1-70B-Instruct"}, GPUs: 1, StragglerIndex: -1},
	} {
		err := Run(context.Background(), bad)
		if !asUsage(err, &ue) {
			t.Errorf("%+v: %v, want a UsageError", bad.Config, err)
		}
	}
}

func asUsage(err error, ue **UsageError) bool {
	u, ok := err.(*UsageError)
	*ue = u
	return ok
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// A simulated burn (Load) reads as a fully loaded card from its first sample on, however long the
// GPU sat idle before, and as idle again once the load has stopped.
func TestFleetLoadReadsBusyAtOnce(t *testing.T) {
	f, err := NewFleet(FleetConfig{GPU: "H200", Count: 1, StragglerIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sample(0); err != nil { // opens a long idle window
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := f.Load(0, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s, _ := f.Sample(0)
	if s.UtilPct != 100 || s.ClockReasons != 0x4 || s.PowerW < 600 {
		t.Fatalf("under load: util %d%% reasons %#x power %.0f W, want 100%%, sw_power_cap, near 700 W", s.UtilPct, s.ClockReasons, s.PowerW)
	}
	time.Sleep(400 * time.Millisecond)
	f.Sample(0)
	time.Sleep(50 * time.Millisecond)
	if s, _ = f.Sample(0); s.UtilPct != 0 || s.ClockReasons != 0x1 {
		t.Fatalf("after the load: util %d%% reasons %#x, want idle", s.UtilPct, s.ClockReasons)
	}
	if err := f.Load(5, time.Second); err == nil {
		t.Fatal("Load on a GPU the fleet does not have: no error")
	}
}
