package pipeline

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// quick is a sim plan with a profile short enough for a unit test on a loaded 2-core machine. It
// keeps no history: every simulated GPU has the same UUID in every test, and one test's run would
// become the next one's acceptance (history_test.go tests the history).
func quick(t *testing.T, sets ...string) *config.Plan {
	t.Helper()
	base := []string{"backend=sim", "sim.gpus=2", "load.max_duration=1500ms", "load.rates=2", "load.prompt_tokens=64",
		"load.output_tokens=32", "load.max_concurrency=4", "output.dir=" + t.TempDir(), "history.enabled=false"}
	p, err := config.Load(config.Options{Sets: append(base, sets...)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	p := quick(t)
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := results.Read(res.SummaryPath)
	if err != nil {
		t.Fatalf("summary.json unreadable: %v", err)
	}
	if !s.Complete || s.FinishedAt.IsZero() || s.Backend != "sim" || len(s.Hosts) != 1 {
		t.Fatalf("incomplete summary: complete=%v backend=%s", s.Complete, s.Backend)
	}
	h := s.Hosts[0]
	if h.Discovery.Source != "sim" || len(h.Discovery.GPUs) != 2 || h.Health == nil || len(h.Health.GPUs) != 2 {
		t.Fatalf("discovery/health missing: %+v", h.Discovery)
	}
	if len(h.Models) != 1 || len(h.Models[0].Endpoints) != 2 {
		t.Fatalf("want 1 model × 2 endpoints, got %+v", h.Models)
	}
	for _, e := range h.Models[0].Endpoints {
		if e.Status == results.StatusFailed {
			t.Errorf("gpu %v failed: %s", e.GPUs, e.Error)
			continue
		}
		if e.Load == nil || len(e.Load.Runs) < 3 || e.Load.PeakOutputTokS <= 0 {
			t.Errorf("gpu %v: no load measured: %+v", e.GPUs, e.Load)
		}
		if e.Functional == nil || e.Functional.Status != results.StatusOK || len(e.Functional.Tests) != 7 {
			t.Errorf("gpu %v: functional suite: %+v", e.GPUs, e.Functional)
		}
		if e.Power == nil || len(e.Power.Samples) == 0 || e.Power.MeanW <= 0 {
			t.Errorf("gpu %v: no power samples", e.GPUs)
		}
		if len(e.Verdicts) == 0 {
			t.Errorf("gpu %v: no verdicts (judge not applied)", e.GPUs)
		}
		if _, err := os.Stat(filepath.Join(p.Config.Output.Dir, e.RawLoadFile)); e.RawLoadFile == "" || err != nil {
			t.Errorf("gpu %v: raw load file %q: %v", e.GPUs, e.RawLoadFile, err)
		}
	}
	if th := s.Meta.Thresholds["gate.ttft_p95_ms"]; th.Value == nil || *th.Value != 200 || th.Source != "default" {
		t.Errorf("threshold with source not recorded: %+v", th)
	}
	if s.Meta.Settings["load.max_duration"] != "1500ms (flag:--set)" {
		t.Errorf("settings: %q", s.Meta.Settings["load.max_duration"])
	}
	var sb strings.Builder
	term.Summary(&sb, s)
	if !strings.Contains(sb.String(), "Qwen/Qwen3-8B  0") || !strings.Contains(sb.String(), "7/7") {
		t.Errorf("terminal table:\n%s", sb.String())
	}
	for _, f := range []string{"report.html", "junit.xml", "ctrf.json"} { // CTRF beside JUnit on every backend
		if _, err := os.Stat(filepath.Join(p.Config.Output.Dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

// stubLoad is a fast stand-in for the load generator (the orchestration, not the measurement, is
// under test here).
func stubLoad(_ context.Context, url, model, _ string, lc results.LoadConfig, _ string) (*results.Load, error) {
	return &results.Load{Config: lc, Model: model, URL: url, PeakOutputTokS: 1000, SustainedReqS: 4,
		Runs: []results.Run{{Kind: "synchronous", Concurrency: 1, Requests: results.RequestCounts{Successful: 40}, OutputTokS: 100,
			TTFT: results.Dist{Count: 40, P50: 20, P95: 30, P99: 35}, ITL: results.Dist{Count: 40 * 99, P50: 5, P95: 7, P99: 8}}}}, nil
}

func TestFailInIsolatesAndReports(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	tests := []struct {
		phase string
		check func(t *testing.T, s *results.Summary)
	}{
		{"discover", func(t *testing.T, s *results.Summary) {
			if !strings.Contains(s.Hosts[0].Discovery.Error, "injected") || s.Status != results.StatusFailed {
				t.Errorf("discovery failure not recorded: %+v", s.Hosts[0].Discovery)
			}
		}},
		{"health", func(t *testing.T, s *results.Summary) {
			if h := s.Hosts[0].Health; h == nil || h.Status != results.StatusFailed || !strings.Contains(h.Error, "injected") {
				t.Errorf("health failure not recorded: %+v", h)
			}
			if n := len(s.Hosts[0].Models[0].Endpoints); n != 2 {
				t.Errorf("the run must go on after health failed: %d endpoints", n)
			}
		}},
		{"serve", nil}, {"warmup", nil}, {"load", nil}, {"functional", nil},
		{"judge", func(t *testing.T, s *results.Summary) {
			if !strings.Contains(s.Error, "judge") || s.Status != results.StatusFailed {
				t.Errorf("judge failure not recorded: %q %s", s.Error, s.Status)
			}
		}},
		{"write", func(t *testing.T, s *results.Summary) {
			if !strings.Contains(strings.Join(s.Caveats, " "), "report not written") {
				t.Errorf("report failure not recorded: %v", s.Caveats)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.phase, func(t *testing.T) {
			p := quick(t, "run.fail_in="+tt.phase)
			deps := NewDeps(p.Config, nil, nil)
			deps.Load = stubLoad
			res, err := Run(context.Background(), p, deps, Options{Host: "h"})
			if err != nil {
				t.Fatal(err)
			}
			s, err := results.Read(res.SummaryPath)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Complete {
				t.Errorf("an injected failure must not stop the run: complete=false")
			}
			if res.ExitCode != 1 && tt.phase != "write" {
				t.Errorf("exit code %d, want 1", res.ExitCode)
			}
			if tt.check != nil {
				tt.check(t, s)
				return
			}
			// Per-GPU phases fail on the first GPU only; the second goes on and is measured.
			eps := s.Hosts[0].Models[0].Endpoints
			if len(eps) != 2 {
				t.Fatalf("want 2 endpoints, got %d", len(eps))
			}
			if eps[0].Status != results.StatusFailed || !strings.Contains(eps[0].Error, "injected") {
				t.Errorf("gpu 0: want failed with the injected error, got %s %q", eps[0].Status, eps[0].Error)
			}
			if eps[1].Status == results.StatusFailed || eps[1].Load == nil {
				t.Errorf("gpu 1 must be measured after gpu 0 failed: %s %q", eps[1].Status, eps[1].Error)
			}
		})
	}
}

func TestInterruptedRunKeepsPartialResults(t *testing.T) {
	p := quick(t, "sim.gpus=3", "run.parallel_gpus=1")
	deps := NewDeps(p.Config, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := 0
	deps.Load = func(ctx context.Context, url, model, k string, lc results.LoadConfig, rec string) (*results.Load, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 2 {
			// GPU 1 is loading: what is on disk now must be a valid, incomplete summary with GPU 0 in it.
			s, err := results.Read(filepath.Join(p.Config.Output.Dir, "summary.json"))
			if err != nil || s.Complete || len(s.Hosts[0].Models[0].Endpoints) != 1 {
				t.Errorf("mid-run summary: err %v, complete %v", err, s != nil && s.Complete)
			}
			cancel() // Ctrl-C
			<-ctx.Done()
			return &results.Load{Interrupted: true, Error: "interrupted"}, ctx.Err()
		}
		return stubLoad(ctx, url, model, k, lc, rec)
	}
	res, err := Run(ctx, p, deps, Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := results.Read(res.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	eps := s.Hosts[0].Models[0].Endpoints
	if s.Complete || !strings.Contains(s.Error, "interrupted") || res.ExitCode != 1 {
		t.Errorf("want an incomplete, interrupted summary: complete=%v error=%q exit=%d", s.Complete, s.Error, res.ExitCode)
	}
	// gpu 0 is measured; alone (its peers stopped), with no reference, its throughput is not judged
	// (issue 42): inconclusive, every gate else passing.
	if len(eps) != 3 || eps[0].Load == nil || eps[0].Status != results.StatusInconclusive || !eps[1].Load.Interrupted {
		t.Fatalf("want gpu 0 measured and gpu 1 interrupted, gpu 2 not started: %+v", eps)
	}
	// The GPU that was running is interrupted, the one never reached is not run, and the run says so.
	if eps[1].Status != results.StatusInterrupted || eps[2].Status != results.StatusNotRun || s.Status != results.StatusInterrupted {
		t.Errorf("statuses: gpu1 %s gpu2 %s run %s, want interrupted, not_run, interrupted", eps[1].Status, eps[2].Status, s.Status)
	}
	if !strings.Contains(s.Error, "Qwen/Qwen3-8B on gpu 1") || !strings.Contains(s.Error, "1 endpoint(s) not run") {
		t.Errorf("the error does not say what was interrupted: %q", s.Error)
	}
	if d := Describe(res); !strings.HasPrefix(d, "status interrupted: 3 GPU(s): 1 inconclusive, 1 interrupted, 1 not_run") {
		t.Errorf("last line: %s", d)
	}
	junit, err := os.ReadFile(filepath.Join(p.Config.Output.Dir, "junit.xml"))
	if err != nil || !strings.Contains(string(junit), `errors="3"`) || !strings.Contains(string(junit), "run.complete") {
		t.Errorf("junit.xml does not fail an interrupted run (err %v):\n%s", err, junit)
	}
}

func TestEndpointBackendVetsARunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	// A simulator started by the test plays the already-running server.
	p0 := quick(t)
	d0 := NewDeps(p0.Config, nil, nil)
	src, _, err := d0.Discover(context.Background(), p0.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sv, err := d0.Backend.Serve(context.Background(), Slot{GPUs: []int{0}}, "Qwen/Qwen3-8B", p0.Config, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Stop()
	p := quick(t, "backend=endpoint", "endpoint.url="+sv.URL)
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if !s.Complete || s.Hosts[0].Health != nil || len(s.Hosts[0].Models[0].Endpoints) != 1 {
		t.Fatalf("endpoint run: complete=%v health=%v", s.Complete, s.Hosts[0].Health)
	}
	e := s.Hosts[0].Models[0].Endpoints[0]
	if e.Status == results.StatusFailed || e.Load == nil || e.Functional.Status != results.StatusOK {
		t.Errorf("endpoint not vetted: %s %q", e.Status, e.Error)
	}
}

func TestBadOutputDirIsAnError(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	p := quick(t, "output.dir="+filepath.Join(f, "sub"))
	if _, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{}); err == nil {
		t.Fatal("want an error for an output directory under a file")
	}
}

// TestSerialAndParallelAgree shows on the simulator that loading GPUs one at a time and all at once
// measure the same thing: per GPU, the medians of sync TTFT and ITL and the peak output rate agree
// within noise (35 %: a shared 2-core test machine runs both the servers and the clients).
func TestSerialAndParallelAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("two simulated runs")
	}
	t.Parallel()
	// limited: the run said its peak is not the server's (its client fell behind, or the sweep is a
	// lower bound): then only the latencies must agree.
	type fig struct {
		ttft, itl, peak float64
		limited         bool
	}
	measure := func(parallel string) map[int]fig {
		p := quick(t, "run.parallel_gpus="+parallel, "functional.enabled=false")
		res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Summary.Meta.ParallelGPUs; fmt.Sprint(got) != parallel {
			t.Errorf("parallel_gpus recorded as %d, want %s", got, parallel)
		}
		out := map[int]fig{}
		for _, e := range res.Summary.Hosts[0].Models[0].Endpoints {
			if e.Load == nil || len(e.Load.Runs) == 0 || e.Load.Runs[0].Kind != "synchronous" {
				t.Fatalf("parallel=%s gpu %v: no sync run (%s)", parallel, e.GPUs, e.Error)
			}
			s := e.Load.Runs[0]
			limited := e.Load.Client.ClientLimited || e.Load.Saturation.LowerBound()
			for _, r := range e.Load.Runs {
				limited = limited || r.ClientLimited
			}
			out[e.GPUs[0]] = fig{s.TTFT.P50, s.ITL.P50, e.Load.PeakOutputTokS, limited}
		}
		return out
	}
	serial, parallel := measure("1"), measure("2")
	within := func(a, b float64) bool { return a > 0 && b > 0 && math.Abs(a-b)/math.Max(a, b) <= 0.35 }
	for g, s := range serial {
		p := parallel[g]
		t.Logf("gpu %d: serial TTFT p50 %.1f ms, ITL p50 %.2f ms, peak %.0f tok/s | parallel %.1f ms, %.2f ms, %.0f tok/s",
			g, s.ttft, s.itl, s.peak, p.ttft, p.itl, p.peak)
		peakAgrees := within(s.peak, p.peak) || s.limited || p.limited
		if !within(s.itl, p.itl) || !peakAgrees || !within(s.ttft, p.ttft) {
			t.Errorf("gpu %d: serial and parallel disagree beyond noise: %+v vs %+v", g, s, p)
		}
	}
}

func TestSaveBaselineThenCompare(t *testing.T) {
	p := quick(t, "run.save_baseline=true", "functional.enabled=false")
	deps := NewDeps(p.Config, nil, nil)
	deps.Load = stubLoad
	res, err := Run(context.Background(), p, deps, Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(filepath.Dir(res.SummaryPath), "baseline.json")
	if _, err := results.Read(base); err != nil {
		t.Fatalf("--save-baseline: %v", err)
	}
	p2 := quick(t, "run.baseline="+base, "functional.enabled=false", "environment=vm")
	deps2 := NewDeps(p2.Config, nil, nil)
	deps2.Load = stubLoad
	res2, err := Run(context.Background(), p2, deps2, Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	b := res2.Summary.Baseline
	if b == nil || b.BaselineFile != base || len(b.Rows) == 0 {
		t.Fatalf("no baseline comparison: %+v", b)
	}
	// A missing baseline is a note, never a failed run.
	p3 := quick(t, "run.baseline=/nonexistent/baseline.json", "functional.enabled=false")
	deps3 := NewDeps(p3.Config, nil, nil)
	deps3.Load = stubLoad
	res3, err := Run(context.Background(), p3, deps3, Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if b := res3.Summary.Baseline; b == nil || b.Note == "" || !res3.Summary.Complete {
		t.Errorf("unreadable baseline: %+v", b)
	}
}

func TestEngineThatDiesKeepsItsLogTail(t *testing.T) {
	p := quick(t, "backend=local", "health.source=sim", "engine.kind=generic", "sim.gpus=1",
		"engine.command=sh -c 'echo loading weights; echo CUDA out of memory on port {port} >&2; exit 3'")
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Summary.Hosts[0].Models[0].Endpoints[0]
	if e.Status != results.StatusFailed || !strings.Contains(e.Error, "serve") || !strings.Contains(e.LogTail, "CUDA out of memory") || e.LogFile == "" {
		t.Fatalf("want a failed serve with the log tail: %s %q tail=%q", e.Status, e.Error, e.LogTail)
	}
	if !res.Summary.Complete || res.ExitCode != 1 {
		t.Errorf("complete=%v exit=%d", res.Summary.Complete, res.ExitCode)
	}
}

// TestRunUsesTheModelCache is `gpuvet run` with backend local and a managed cache: the cached model's
// engine starts with HF_HOME/HF_HUB_CACHE and the hub offline (the fake engine prints its HF_*
// environment into its log, then exits); a model absent from the cache on a host that cannot reach
// the hub fails with the exact `gpuvet cache pull` command, starts no engine, and the run goes on.
func TestRunUsesTheModelCache(t *testing.T) {
	home := filepath.Join(t.TempDir(), "hf")
	cache := filepath.Join(home, "hub")
	writeCachedModel(t, cache, "acme/tiny")
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1") // nothing listens: the hub is unreachable
	t.Setenv("HF_HUB_OFFLINE", "")
	p := quick(t, "backend=local", "health.source=sim", "engine.kind=generic", "sim.gpus=1",
		"models=acme/tiny,acme/absent", "model_cache.dir="+cache,
		"engine.command=sh -c 'env | grep ^HF_ | sort; echo no server on port {port}; exit 3'")
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	ms := res.Summary.Hosts[0].Models
	if len(ms) != 2 {
		t.Fatalf("want 2 models, got %d", len(ms))
	}
	tiny, absent := ms[0], ms[1]
	if tiny.Model != "acme/tiny" {
		tiny, absent = absent, tiny
	}
	if len(tiny.Endpoints) != 1 {
		t.Fatalf("the cached model's engine must start: %s %q", tiny.Status, tiny.Error)
	}
	tail := tiny.Endpoints[0].LogTail
	for _, want := range []string{"HF_HOME=" + home + "\n", "HF_HUB_CACHE=" + cache + "\n", "HF_HUB_OFFLINE=1\n"} {
		if !strings.Contains(tail, want) {
			t.Errorf("the engine's environment lacks %q; its log:\n%s", want, tail)
		}
	}
	want := "gpuvet cache pull acme/absent --cache-dir " + cache + " --endpoint http://127.0.0.1:1"
	if absent.Status != results.StatusFailed || !strings.Contains(absent.Error, "model cache") ||
		!strings.Contains(absent.Error, want) || len(absent.Endpoints) != 0 {
		t.Fatalf("want the absent model failed with %q and no engine started: %s %q", want, absent.Status, absent.Error)
	}
	if res.Summary.Hosts[0].Health == nil || !res.Summary.Complete {
		t.Errorf("the rest of the run must still be recorded")
	}
}

// writeCachedModel lays out model in a hub cache the way the hub libraries do:
// models--org--name/{blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>, refs/main}.
func writeCachedModel(t *testing.T, cache, model string) {
	t.Helper()
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(model, "/", "--"))
	commit := strings.Repeat("ab", 20)
	body := []byte("not really weights")
	sum := fmt.Sprintf("%x", sha256.Sum256(body))
	snap := filepath.Join(repo, "snapshots", commit)
	for _, d := range []string{filepath.Join(repo, "blobs"), snap, filepath.Join(repo, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "blobs", sum), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "blobs", sum), filepath.Join(snap, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
}

// With dir auto a generic engine gets no managed cache (its command may not load hub weights), and
// the summary says so.
func TestGenericEngineAutoCacheIsNoted(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "")
	p := quick(t, "backend=local", "health.source=sim", "engine.kind=generic", "sim.gpus=1",
		"engine.command=sh -c 'env | grep ^HF_HUB_OFFLINE; exit 3; echo {port}'")
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Summary.Caveats, func(c string) bool { return strings.Contains(c, "no managed model cache for engine kind generic") }) {
		t.Errorf("caveats lack the generic-engine cache note: %q", res.Summary.Caveats)
	}
	m := res.Summary.Hosts[0].Models[0]
	if len(m.Endpoints) != 1 || strings.Contains(m.Endpoints[0].LogTail, "HF_HUB_OFFLINE=1") {
		t.Errorf("the generic engine must start without the cache env: %s %q %+v", m.Status, m.Error, m.Endpoints)
	}
}

func TestBindLoad(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node/node0/cpulist"); err != nil {
		t.Skip("no NUMA sysfs")
	}
	tests := []struct {
		sets []string
		node int
		want string
	}{
		{[]string{"backend=local"}, 0, "of NUMA node 0 (sched_setaffinity"},
		{[]string{"backend=local"}, -1, "node is unknown"},
		{[]string{"backend=local", "run.parallel_gpus=2"}, 0, "several GPUs"},
		{[]string{"backend=local", "engine.numa_bind=false"}, 0, "numa_bind=false"},
		{[]string{"backend=sim"}, 0, ""},
	}
	for _, tt := range tests {
		p := quick(t, tt.sets...)
		r := &run{plan: p, cfg: p.Config}
		undo, got := r.bindLoad(Slot{NUMANode: tt.node}, p.Config)
		undo()
		if !strings.Contains(got, tt.want) || (tt.want == "" && got != "") {
			t.Errorf("%v node %d: %q, want %q", tt.sets, tt.node, got, tt.want)
		}
	}
}

// An aicr recipe's gates are judged on a fixed-concurrency run that the pipeline adds after the profile.
func TestAICRRecipeAddsTheConcurrencyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	base := []string{"backend=sim", "sim.gpus=1", "load.max_duration=1500ms", "load.rates=2", "load.prompt_tokens=64",
		"load.output_tokens=32", "load.max_concurrency=4", "load.concurrency=8", "functional.enabled=false", "output.dir=" + t.TempDir()}
	p, err := config.Load(config.Options{Files: []string{"testdata/gb200-eks-ubuntu-inference-dynamo.yaml"}, Sets: base})
	if err != nil {
		t.Fatal(err)
	}
	deps := NewDeps(p.Config, nil, nil)
	// The sweep is real; the aicr run's load (1000 requests) is checked for its shape and stubbed,
	// so the test stays short.
	var aicr *results.LoadConfig
	real := deps.Load
	deps.Load = func(ctx context.Context, url, model, k string, lc results.LoadConfig, rec string) (*results.Load, error) {
		if lc.Profile != "concurrency" {
			return real(ctx, url, model, k, lc, rec)
		}
		aicr = &lc
		return &results.Load{Config: lc, Runs: []results.Run{{Kind: "concurrency", Concurrency: lc.Concurrency,
			Requests: results.RequestCounts{Successful: lc.MaxRequests}, OutputTokS: 5000, TTFT: results.Dist{Count: lc.MaxRequests, P99: 300}}}}, nil
	}
	res, err := Run(context.Background(), p, deps, Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Summary.Hosts[0].Models[0].Endpoints[0]
	if e.Load == nil {
		t.Fatalf("no load: %s", e.Error)
	}
	// aicr's own load: AIPerf with 128/128 tokens and max(1000, 8 × concurrency) requests.
	if aicr == nil || aicr.Concurrency != 8 || aicr.PromptTokens != 128 || aicr.OutputTokens != 128 || aicr.MaxRequests != 1000 || aicr.MaxDuration != 0 {
		t.Fatalf("aicr run load: %+v, want concurrency 8, 128/128 tokens, 1000 requests, no duration bound", aicr)
	}
	if c := config.AICRLoad(*aicr, 256); c.MaxRequests != 2048 || c.Warmup != "256" {
		t.Errorf("at 256 in flight: %d requests (want 2048), warm-up %s", c.MaxRequests, c.Warmup)
	}
	found := false
	for _, r := range e.Load.Runs {
		found = found || (r.Kind == "concurrency" && r.Concurrency == 8)
	}
	if !found {
		t.Errorf("no concurrency run at 8 in %d runs", len(e.Load.Runs))
	}
	judged := 0
	for _, v := range e.Verdicts {
		if strings.HasPrefix(v.Check, "gate.aicr") && v.Result != "disabled" {
			judged++
			if !strings.HasPrefix(v.Source, "recipe:") {
				t.Errorf("%s: source %q, want the recipe", v.Check, v.Source)
			}
		}
	}
	if judged != 2 {
		t.Errorf("want both aicr gates judged, got %d: %+v", judged, e.Verdicts)
	}
}
