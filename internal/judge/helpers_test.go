package judge

import (
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Test summaries are built here in Go: no simulator needed. The figures are those of a healthy
// H200 serving an 8B model under the seed's shared profile (512/256 tokens), scaled as a test needs.

const (
	testGPU   = "NVIDIA H200"
	testModel = "Qwen/Qwen3-8B"
)

// perf is what one endpoint measured.
type perf struct {
	syncTTFT, syncITL, syncTPOT float64 // sync run p95s, ms
	sustained                   float64 // req/s
	outTokPerReq                float64 // mean output tokens per request
	requests                    int     // successful requests over the sweep
	lowerBound                  bool    // the sweep was truncated
	// spread is the half-width of every judged figure's 95 % interval, as a share of the figure
	// (0.01 = ±1 %, a quiet machine); -1 gives no intervals at all (an old summary).
	spread float64
}

func healthy() perf {
	return perf{syncTTFT: 40, syncITL: 8, syncTPOT: 8.2, sustained: 40, outTokPerReq: 256, requests: 2400, spread: 0.01}
}

// scaled returns a card that is slower by frac (0.3 = 30 % less throughput, latencies / 0.7).
func (p perf) scaled(frac float64) perf {
	k := 1 - frac
	p.sustained *= k
	p.syncTTFT /= k
	p.syncITL /= k
	p.syncTPOT /= k
	return p
}

func dist(p95 float64, n int) results.Dist {
	return results.Dist{Count: n, Mean: p95 * 0.8, Min: p95 * 0.5, Max: p95 * 1.2, P50: p95 * 0.8, P90: p95 * 0.95, P95: p95, P99: p95 * 1.1}
}

// sweepLoad builds a sweep: a sync run (40 requests, enough for the sample guard) and the constant rungs carrying the rest.
func sweepLoad(p perf) *results.Load {
	peak := p.sustained * p.outTokPerReq
	syncN := 40
	rest := max(p.requests-syncN, 0)
	l := &results.Load{
		Config: results.LoadConfig{Profile: "sweep", API: "chat", PromptTokens: 512, OutputTokens: 256, MaxConcurrency: 128,
			Rates: 10, MaxDuration: results.Duration(20 * time.Second), Warmup: "1"},
		Model: testModel, TokenCounts: "tokenizer.json",
		Runs: []results.Run{
			{Kind: RunSynchronous, Concurrency: 1, WindowSeconds: 20, Requests: results.RequestCounts{Successful: min(syncN, p.requests)},
				TTFT: dist(p.syncTTFT, min(syncN, p.requests)), ITL: dist(p.syncITL, min(syncN, p.requests)*255), TPOT: dist(p.syncTPOT, min(syncN, p.requests)),
				OutputTokS: p.outTokPerReq / (p.syncTTFT/1000 + 255*p.syncITL/1000), MeanOutputTokens: p.outTokPerReq},
			{Kind: "throughput", Concurrency: 128, WindowSeconds: 20, Requests: results.RequestCounts{Successful: rest / 2},
				TTFT: dist(p.syncTTFT*20, rest/2), ITL: dist(p.syncITL*3, rest/2*255), OutputTokS: peak, MeanOutputTokens: p.outTokPerReq},
			{Kind: "constant", TargetRate: p.sustained * 0.9, WindowSeconds: 20, Requests: results.RequestCounts{Successful: rest - rest/2},
				TTFT: dist(p.syncTTFT*3, rest-rest/2), ITL: dist(p.syncITL*2, (rest-rest/2)*255), OutputTokS: peak * 0.95, MeanOutputTokens: p.outTokPerReq},
		},
		Saturation:     &results.Saturation{Truncated: p.lowerBound, Peak: peak, Rungs: []float64{peak * 0.95}},
		PeakOutputTokS: peak,
		SustainedReqS:  p.sustained,
	}
	if p.spread >= 0 {
		around := func(v float64) *results.Interval { return ci(v*(1-p.spread), v*(1+p.spread)) }
		sr := &l.Runs[0]
		sr.CI = &results.Intervals{TTFTP95: around(sr.TTFT.P95), TTFTP99: around(sr.TTFT.P99), ITLP95: around(sr.ITL.P95),
			TPOTP95: around(sr.TPOT.P95), TPOTP50: around(sr.TPOT.P50), OutputTokS: around(sr.OutputTokS)}
		for i := 1; i < len(l.Runs); i++ {
			r := &l.Runs[i]
			r.CI = &results.Intervals{TTFTP95: around(r.TTFT.P95), TTFTP99: around(r.TTFT.P99), ITLP95: around(r.ITL.P95), OutputTokS: around(r.OutputTokS)}
		}
	}
	if p.lowerBound {
		l.Saturation.Reason = "top rung ≥ peak and > 1.05 × the rung below"
	}
	return l
}

func endpoint(gpu int, p perf) results.Endpoint {
	return results.Endpoint{GPUs: []int{gpu}, GPUName: testGPU, Load: sweepLoad(p),
		Functional: &results.Functional{Status: results.StatusOK, Tests: []results.FunctionalTest{{Name: "chat_completion", Passed: true}}}}
}

// summary builds a one-host summary with one model served on one endpoint per perf.
func summary(ps ...perf) *results.Summary {
	m := results.Model{Model: testModel, Engine: results.EngineInfo{Kind: "vllm", Version: "0.11.0"}}
	var gpus []results.GPUInfo
	var hg []results.GPUHealth
	for i, p := range ps {
		m.Endpoints = append(m.Endpoints, endpoint(i, p))
		gi := results.GPUInfo{Index: i, Name: testGPU, UUID: "GPU-test-" + string(rune('a'+i)), DriverVersion: "570.86.15"}
		gpus = append(gpus, gi)
		hg = append(hg, results.GPUHealth{GPU: gi, Status: results.StatusOK,
			Bench: []results.Microbench{{Name: "sgemm_fp32", Value: 51.2, Unit: "TFLOP/s", Status: results.StatusOK}}})
	}
	prof := sweepLoad(healthy()).Config
	return &results.Summary{
		SchemaVersion: results.SchemaVersion, RunID: "test", Complete: true, Backend: "sim", Environment: "baremetal",
		Meta: results.Meta{DriverVersion: "570.86.15", Engine: "vllm", EngineVersion: "0.11.0", Models: []string{testModel}, LoadProfile: &prof},
		Hosts: []results.Host{{Name: "node1", Discovery: results.Discovery{Source: "sim", GPUs: gpus},
			Health: &results.Health{Source: "sim", GPUs: hg, Status: results.StatusOK}, Models: []results.Model{m}}},
	}
}

func fp(v float64) *float64 { return &v }

func ci(lo, hi float64) *results.Interval { return &results.Interval{Lo: lo, Hi: hi, Level: 0.95} }

// flagOf is ep's last flag of check (nil when none), to read or assert on in place.
func flagOf(ep *results.Endpoint, check string) *results.Flag {
	var out *results.Flag
	for i := range ep.Flags {
		if ep.Flags[i].Check == check {
			out = &ep.Flags[i]
		}
	}
	return out
}
