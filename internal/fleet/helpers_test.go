package fleet

import (
	"time"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// perf is what one endpoint measured (figures of a healthy H200 serving an 8B model).
type perf struct {
	ttft, itl, sustained float64
	requests             int
}

func healthy() perf { return perf{ttft: 40, itl: 8, sustained: 40, requests: 2400} }

// scaled is a card slower by frac (0.3 = 30 % less throughput, latencies / 0.7).
func (p perf) scaled(frac float64) perf {
	k := 1 - frac
	p.sustained *= k
	p.ttft /= k
	p.itl /= k
	return p
}

func dist(p95 float64, n int) results.Dist {
	return results.Dist{Count: n, Mean: p95 * 0.8, P50: p95 * 0.8, P95: p95, P99: p95 * 1.1}
}

// around is a ±1 % interval: every judged figure carries one, as the load generator's do.
func around(v float64) *results.Interval {
	return &results.Interval{Lo: v * 0.99, Hi: v * 1.01, Level: 0.95}
}

func load(p perf) *results.Load {
	peak := p.sustained * 256
	sync := dist(p.ttft, 10)
	return &results.Load{
		Config: results.LoadConfig{Profile: "sweep", MaxDuration: results.Duration(20 * time.Second)},
		Runs: []results.Run{
			{Kind: judge.RunSynchronous, Concurrency: 1, Requests: results.RequestCounts{Successful: 10},
				TTFT: sync, ITL: dist(p.itl, 2550), TPOT: dist(p.itl, 10), OutputTokS: 100,
				CI: &results.Intervals{TTFTP95: around(sync.P95), ITLP95: around(p.itl), TPOTP95: around(p.itl), TPOTP50: around(p.itl * 0.8)}},
			{Kind: "throughput", Concurrency: 128, Requests: results.RequestCounts{Successful: p.requests - 10},
				TTFT: dist(p.ttft*20, p.requests-10), OutputTokS: peak, CI: &results.Intervals{OutputTokS: around(peak)}},
		},
		Saturation: &results.Saturation{Peak: peak, Rungs: []float64{peak * 0.95}}, PeakOutputTokS: peak, SustainedReqS: p.sustained,
	}
}

// oneHost is a host summary serving one model on one endpoint per perf, with a GEMM figure per GPU.
func oneHost(ps ...perf) *results.Summary {
	m := results.Model{Model: "Qwen/Qwen3-8B"}
	var hg []results.GPUHealth
	for i, p := range ps {
		m.Endpoints = append(m.Endpoints, results.Endpoint{GPUs: []int{i}, Load: load(p)})
		hg = append(hg, results.GPUHealth{GPU: results.GPUInfo{Index: i}, Status: results.StatusOK,
			Bench: []results.Microbench{{Name: "sgemm_fp32", Value: 51.2, Unit: "TFLOP/s", Status: results.StatusOK}}})
	}
	return &results.Summary{SchemaVersion: results.SchemaVersion, Meta: results.Meta{Engine: "vllm", Models: []string{m.Model}},
		Hosts: []results.Host{{Name: "localhost", Health: &results.Health{GPUs: hg, Status: results.StatusOK}, Models: []results.Model{m}}}}
}
