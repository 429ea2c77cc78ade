package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/history/historytest"
	"github.com/gpuvet/gpuvet/internal/results"
)

// eachStore runs fn against a fresh store of each kind.
func eachStore(t *testing.T, fn func(t *testing.T, h config.History)) {
	for _, k := range historytest.Kinds {
		t.Run(k.Name, func(t *testing.T) { fn(t, k.Fresh(t)) })
	}
}

func mustOpen(t testing.TB, h config.History) *Store {
	t.Helper()
	st, err := Open(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func count(t testing.TB, st *Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := st.db.QueryRow(st.q(q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// ci is a ±pct interval around v.
func ci(v, pct float64) *results.Interval {
	return &results.Interval{Lo: v * (1 - pct/100), Hi: v * (1 + pct/100), Level: 0.95}
}

// synth is a judged-looking summary of one run over hosts × gpus: every GPU with a GEMM figure and
// one endpoint whose synchronous rung has TTFT, ITL and TPOT with intervals, at speed (1 = healthy;
// 0.9: 10 % slower). uuid(host, gpu) names each GPU.
func synth(runID string, at time.Time, hosts, gpus int, speed float64, uuid func(h, g int) string) *results.Summary {
	s := &results.Summary{SchemaVersion: results.SchemaVersion, RunID: runID, StartedAt: at, FinishedAt: at.Add(time.Minute),
		Complete: true, Backend: "sim", Environment: "baremetal", Status: results.StatusOK, Tool: results.Tool{Name: "gpuvet", Version: "test"}}
	for h := 0; h < hosts; h++ {
		host := results.Host{Name: fmt.Sprintf("node-%04d", h), Status: results.StatusOK, Health: &results.Health{Status: results.StatusOK}}
		m := results.Model{Model: "Qwen/Qwen3-8B", Status: results.StatusOK}
		for g := 0; g < gpus; g++ {
			info := results.GPUInfo{Index: g, Name: "NVIDIA H200", UUID: uuid(h, g), Serial: fmt.Sprintf("SN%04d%02d", h, g)}
			host.Discovery.GPUs = append(host.Discovery.GPUs, info)
			var bench []results.Microbench
			for _, name := range results.MicrobenchNames() {
				v := map[string]float64{"sgemm_fp32": 54, "gemm_tf32": 455, "gemm_bf16": 780, "pcie_h2d": 55, "pcie_d2h": 55, "hbm_d2d": 4100}[name]
				bench = append(bench, results.Microbench{Name: name, Value: v * speed, Unit: "x", Status: results.StatusOK})
			}
			host.Health.GPUs = append(host.Health.GPUs, results.GPUHealth{GPU: info, Status: results.StatusOK, Bench: bench,
				Burn: &results.Burn{TFLOPS: 700 * speed, PowerMeanW: 690, MinSMClockMHz: 1980}})
			itl, tpot, ttft := 6.5/speed, 6.4/speed, 40/speed
			run := results.Run{Kind: "synchronous", Concurrency: 1, Requests: results.RequestCounts{Successful: 200},
				TTFT: results.Dist{Count: 200, P50: ttft * 0.9, P95: ttft}, ITL: results.Dist{Count: 20000, P50: itl * 0.95, P95: itl},
				TPOT: results.Dist{Count: 200, P50: tpot, P95: tpot * 1.05}, OutputTokS: 150 * speed,
				CI: &results.Intervals{TTFTP95: ci(ttft, 2), ITLP95: ci(itl, 1), TPOTP50: ci(tpot, 0.5), TPOTP95: ci(tpot*1.05, 1), OutputTokS: ci(150*speed, 1)}}
			load := &results.Load{Model: m.Model, Runs: []results.Run{run}, PeakOutputTokS: 150 * speed, SustainedReqS: 1.2 * speed}
			m.Endpoints = append(m.Endpoints, results.Endpoint{GPUs: []int{g}, GPUName: "NVIDIA H200", Load: load, Status: results.StatusOK,
				Power:    &results.Power{MeanW: 420, TokensPerJoule: 0.36 * speed},
				Verdicts: []results.Verdict{{Check: "gate.ttft_p95", Rule: "sync TTFT p95 ≤ 200 ms", Result: "pass", Source: "default"}}})
		}
		host.Models = []results.Model{m}
		s.Hosts = append(s.Hosts, host)
	}
	return s
}

func uuidOf(h, g int) string { return fmt.Sprintf("GPU-%04d-%02d", h, g) }
