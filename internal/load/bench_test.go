package load

// Benchmarks that print the load generator's figures (they run once, whatever b.N):
//
//	go test ./internal/load -run '^$' -bench Fidelity -benchtime 1x -v
//	go test ./internal/load -run '^$' -bench Ceiling  -benchtime 1x -v
//	go test ./internal/load -run '^$' -bench Memory   -benchtime 1x -v
//
// Targets (issue 3): fidelity at 256 streams — TTFT p50 within 1 ms and p99 within 2 ms of the
// simulator's trace, ITL p50 within 0.2 ms; ceiling — 1,000 streams at 50,000 tok/s without the self-check
// tripping, 10,000 streams neither crash nor leak; memory — under 300 MB RSS at 4,000 streams.
// Measured 2026-11-29 on a 16-core H200 host with the client pinned to 2 cores (taskset -c 0,1) and the
// simulator child on the others (GPUVET_SIM_CPUS=2-15):
//
//	fidelity   TTFT p50 Δ +0.20 ms, p99 Δ +0.41 ms, ITL p50 Δ +0.03 ms (3,839 requests)      met
//	ceiling    49,828 tok/s from 1,000 streams, lag p99 3.8 ms, client CPU 79 % of one core    met
//	10k        19,999 requests, 0 errors; goroutines 2 -> 2, open fds 9 -> 9                  met
//	memory     peak RSS 255 MB at 4,000 streams                                               met
//
// On the shared 2-core development machine (load average 5-9) the same benchmarks run, but its
// scheduling stalls of 30-120 ms put the TTFT p99 and the lag far off: figures from there say
// nothing about the client.
//
// All run the simulator (sim.Listen, fixed mode) in a child process, so the client's CPU and
// memory are its own (GPUVET_SIM_CPUS=2-15 pins that child with taskset, e.g. when the client itself
// runs under taskset -c 0,1 to stand for a 2-core machine).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

func BenchmarkFidelity(b *testing.B) {
	tracePath := b.TempDir() + "/trace.jsonl"
	b.Setenv("GPUVET_SIM_TRACE", tracePath)
	url, stop := simChild(b, "50ms", "10ms")
	o := opts(url, results.LoadConfig{Profile: "concurrency", Concurrency: 256, PromptTokens: 512, OutputTokens: 64,
		MaxDuration: results.Duration(benchDuration(10 * time.Second))})
	o.RecordsPath = b.TempDir() + "/records.jsonl"
	b.ResetTimer()
	l, err := Run(context.Background(), o)
	b.StopTimer()
	stop()
	if err != nil {
		b.Fatal(err)
	}
	r := l.Runs[0]
	trace, err := os.ReadFile(tracePath)
	if err != nil {
		b.Fatal(err)
	}
	tt, it, n := traceDists(b, trace)
	dTTFT50, dTTFT99, dITL50 := r.TTFT.P50-tt.P50, r.TTFT.P99-tt.P99, r.ITL.P50-it.P50
	b.ReportMetric(dTTFT50, "ttft_p50_delta_ms")
	b.ReportMetric(dTTFT99, "ttft_p99_delta_ms")
	b.ReportMetric(dITL50, "itl_p50_delta_ms")
	b.Logf("fidelity at 256 streams (sim fixed TTFT 50 ms, ITL 10 ms; %d client requests, %d traced):", r.TTFT.Count, n)
	b.Logf("  TTFT p50 client %.3f trace %.3f  Δ %+.3f ms (target ≤ 1)", r.TTFT.P50, tt.P50, dTTFT50)
	b.Logf("  TTFT p99 client %.3f trace %.3f  Δ %+.3f ms (target ≤ 2)", r.TTFT.P99, tt.P99, dTTFT99)
	b.Logf("  ITL  p50 client %.3f trace %.3f  Δ %+.3f ms (target ≤ 0.2)", r.ITL.P50, it.P50, dITL50)
	b.Logf("  ITL  p99 client %.3f trace %.3f", r.ITL.P99, it.P99)
	b.Logf("  client lag p99 %.3f ms, CPU %.0f%%, client_limited %v %s", l.Client.LagP99Ms, l.Client.CPUPercent, l.Client.ClientLimited, l.Client.Reason)
	// Where the TTFT tail comes from: each slot's first request (a new connection) or later ones.
	var first, later []float64
	var worst []Record
	for _, rec := range readRecords(b, o.RecordsPath) {
		if rec.Warmup || rec.Error != "" || rec.Incomplete {
			continue
		}
		if rec.NewConnection {
			first = append(first, rec.TTFTMs)
		} else {
			later = append(later, rec.TTFTMs)
		}
		worst = append(worst, rec)
	}
	slices.SortFunc(worst, func(a, c Record) int { return cmp.Compare(c.TTFTMs, a.TTFTMs) })
	f, lt := metrics.Summarize(first), metrics.Summarize(later)
	b.Logf("  TTFT of the first wave (new connections): n=%d p50 %.2f p99 %.2f; later: n=%d p50 %.2f p99 %.2f", f.Count, f.P50, f.P99, lt.Count, lt.P50, lt.P99)
	for _, w := range worst[:min(5, len(worst))] {
		b.Logf("  slowest: sent at %.0f ms, TTFT %.1f ms", w.SentMs, w.TTFTMs)
	}
	verdict(b, math.Abs(dTTFT50) <= 1 && math.Abs(dTTFT99) <= 2 && math.Abs(dITL50) <= 0.2)
}

func readRecords(b *testing.B, path string) []Record {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var out []Record
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var r Record
		if json.Unmarshal(line, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

func BenchmarkCeiling(b *testing.B) {
	// 1,000 streams × one token every 20 ms = 50,000 tok/s.
	url, stop := simChild(b, "20ms", "20ms")
	l, err := Run(context.Background(), opts(url, results.LoadConfig{Profile: "concurrency", Concurrency: 1000, PromptTokens: 128,
		OutputTokens: 256, MaxDuration: results.Duration(benchDuration(15 * time.Second))}))
	stop()
	if err != nil {
		b.Fatal(err)
	}
	r := l.Runs[0]
	b.ReportMetric(r.OutputTokS, "out_tok/s")
	b.ReportMetric(l.Client.CPUPercent, "client_cpu_%")
	b.ReportMetric(l.Client.LagP99Ms, "lag_p99_ms")
	b.Logf("ceiling, 1,000 streams (sim child, ITL 20 ms → 50,000 tok/s offered): %.0f output tok/s, %d requests, errors %v",
		r.OutputTokS, r.Requests.Successful, r.Errors)
	b.Logf("  lag p50 %.3f p99 %.3f max %.1f ms; client CPU %.0f%% of one core (%d cores); ITL p50 %.3f p99 %.3f ms; client_limited %v %s",
		l.Client.LagP50Ms, l.Client.LagP99Ms, l.Client.LagMaxMs, l.Client.CPUPercent, l.Client.Cores, r.ITL.P50, r.ITL.P99, l.Client.ClientLimited, l.Client.Reason)
	verdict(b, r.OutputTokS >= 0.95*50000 && !l.Client.ClientLimited)
}

func BenchmarkCeiling10k(b *testing.B) {
	url, stop := simChild(b, "500ms", "500ms")
	defer stop()
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	l, err := Run(context.Background(), opts(url, results.LoadConfig{Profile: "concurrency", Concurrency: 10000, PromptTokens: 64,
		OutputTokens: 16, MaxDuration: results.Duration(benchDuration(12 * time.Second))}))
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	g1, fd1 := runtime.NumGoroutine(), openFDs()
	r := l.Runs[0]
	b.Logf("10,000 streams: %d ok, %d errored, errors %v; %.0f tok/s; lag p99 %.1f ms; CPU %.0f%%; client_limited %v",
		r.Requests.Successful, r.Requests.Errored, r.Errors, r.OutputTokS, l.Client.LagP99Ms, l.Client.CPUPercent, l.Client.ClientLimited)
	b.Logf("  goroutines %d before, %d after; open fds %d before, %d after", g0, g1, fd0, fd1)
	verdict(b, r.Requests.Errored == 0 && g1 <= g0+5 && fd1 <= fd0+5)
}

func BenchmarkMemory(b *testing.B) {
	url, stop := simChild(b, "200ms", "50ms")
	defer stop()
	var peak int64
	var ms runtime.MemStats
	var peakAt time.Duration
	t0 := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if rss := rssKB(); rss > peak {
					peak = rss
					runtime.ReadMemStats(&ms)
					peakAt = time.Since(t0)
				}
			}
		}
	})
	o := opts(url, results.LoadConfig{Profile: "concurrency", Concurrency: 4000, PromptTokens: 512,
		OutputTokens: 256, MaxDuration: results.Duration(benchDuration(15 * time.Second))})
	// The soft memory limit gpuvet's main sets for such a run (the library leaves it to the program).
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(MemoryLimit(Streams(o))))
	l, err := Run(context.Background(), o)
	close(done)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	r := l.Runs[0]
	b.ReportMetric(float64(peak)/1024, "peak_rss_MB")
	b.Logf("memory, 4,000 streams: peak RSS %.0f MB (target < 300); %d requests ok, %.0f tok/s, client_limited %v",
		float64(peak)/1024, r.Requests.Successful, r.OutputTokS, l.Client.ClientLimited)
	b.Logf("  at the peak (%.1f s in): heap in use %.0f MB (of %.0f MB held), stacks %.0f MB, runtime total %.0f MB, %d GCs",
		peakAt.Seconds(), float64(ms.HeapInuse)/(1<<20), float64(ms.HeapSys-ms.HeapReleased)/(1<<20), float64(ms.StackInuse)/(1<<20), float64(ms.Sys)/(1<<20), ms.NumGC)
	verdict(b, peak < 300*1024)
}

func verdict(b *testing.B, ok bool) {
	if ok {
		b.Log("  => target MET")
	} else {
		b.Log("  => target NOT met")
	}
}

// benchDuration lets GPUVET_BENCH_SECONDS shorten or lengthen the benchmarks.
func benchDuration(d time.Duration) time.Duration {
	if s, err := strconv.Atoi(os.Getenv("GPUVET_BENCH_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return d
}

// simChild starts the simulator in fixed mode in a child process (this test binary, in TestSimChild)
// and returns its URL and a function that stops it.
func simChild(b *testing.B, ttft, itl string) (string, func()) {
	if err := ensureNoFile(12000); err != nil {
		b.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSimChild$")
	if cpus := os.Getenv("GPUVET_SIM_CPUS"); cpus != "" { // keep the server off the client's cores
		cmd = exec.Command("taskset", "-c", cpus, os.Args[0], "-test.run=^TestSimChild$")
	}
	cmd.Env = append(os.Environ(), "GPUVET_SIM_CHILD="+ttft+","+itl)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "URL ") {
		cmd.Process.Kill()
		b.Fatalf("sim child: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "URL ")), func() {
		stdin.Close()
		cmd.Wait()
	}
}

// TestSimChild is the simulator process of the benchmarks; it does nothing in a normal test run.
func TestSimChild(t *testing.T) {
	spec := os.Getenv("GPUVET_SIM_CHILD")
	if spec == "" {
		t.Skip("only the benchmarks' child process runs this")
	}
	ttft, itl, _ := strings.Cut(spec, ",")
	dt, _ := time.ParseDuration(ttft)
	di, _ := time.ParseDuration(itl)
	cfg := sim.Config{Model: testModel, TTFT: dt, ITL: di}
	if p := os.Getenv("GPUVET_SIM_TRACE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.Trace = f
	}
	srv, err := sim.Listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("URL %s\n", srv.URL())
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	srv.Close()
}

func rssKB() int64 { return statusKB("VmRSS:") }

func statusKB(key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

func openFDs() int {
	e, _ := os.ReadDir("/proc/self/fd")
	return len(e)
}
