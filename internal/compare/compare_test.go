package compare

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func ci(lo, hi float64) *results.Interval { return &results.Interval{Lo: lo, Hi: hi, Level: 0.95} }

// reqCells builds one cell per value, each with n successful requests and ReqS = value.
func reqCells(n int, vals ...float64) []Cell {
	var out []Cell
	for i, v := range vals {
		out = append(out, Cell{GPU: i, Figure: Figure{Value: v, Samples: n, ReqS: v}})
	}
	return out
}

// GPUs is the seed's rule against the best card, by value: the microbenchmarks' (LLM figures go
// through Peers, the interval rule). The LLM cases keep the seed's 20 % to test its guards.
func TestGPUs(t *testing.T) {
	llm := LLMGuards()
	llm.VariancePct = 20
	// The product's GEMM guards come from judge's config, which this package cannot import.
	gemm := Guards{VariancePct: results.DefaultOf(results.ThGEMMVariancePct)}
	tests := []struct {
		name    string
		metric  string
		cells   []Cell
		higher  bool
		g       Guards
		flagged []int  // GPUs that must be flagged, no others
		lowConf bool   // whole comparison low-confidence
		reason  string // substring of the reason of the first non-best card (or the note)
	}{
		{"4 GPUs, one 30 % slower: flag it only", "sustained_req_s", reqCells(400, 10, 10.1, 9.9, 7.07), true, llm,
			[]int{3}, false, "30.0 % below the best (gpu 1"},
		{"15 % slower is within 20 %", "sustained_req_s", reqCells(400, 10, 8.5), true, llm, nil, false, "within 20 %"},
		{"exactly best × 0.8 does not flag (strict)", "sustained_req_s", reqCells(400, 10, 8), true, llm, nil, false, "within 20 %"},
		{"seed: 3-vs-4 requests is low confidence, no flag", "sustained_req_s",
			[]Cell{{GPU: 0, Figure: Figure{Value: 0.2, Samples: 4, ReqS: 0.2}}, {GPU: 1, Figure: Figure{Value: 0.15, Samples: 3, ReqS: 0.15}}}, true, llm,
			nil, true, "weakest GPU's figure has 3 requests"},
		{"29 requests on the weakest is still low confidence", "ttft_p95_ms",
			[]Cell{{GPU: 0, Figure: Figure{Value: 40, Samples: 500}}, {GPU: 1, Figure: Figure{Value: 400, Samples: 29}}}, false, llm, nil, true, "(< 30)"},
		{"30 requests is enough", "ttft_p95_ms",
			[]Cell{{GPU: 0, Figure: Figure{Value: 40, Samples: 500}}, {GPU: 1, Figure: Figure{Value: 400, Samples: 30}}}, false, llm, []int{1}, false, "900.0 % above"},
		{"seed: throughput spread under 1 req/s is a tiny-denominator artifact", "sustained_req_s",
			reqCells(100, 2.0, 1.4), true, llm, nil, false, "tiny-denominator"},
		{"the tiny-denominator guard disabled flags", "sustained_req_s",
			reqCells(100, 2.0, 1.4), true, Guards{VariancePct: 20, MinSamples: 30}, []int{1}, false, "30.0 % below"},
		{"tok/s metric uses the req/s spread", "output_tok_s_peak",
			[]Cell{{GPU: 0, Figure: Figure{Value: 512, Samples: 100, ReqS: 2}}, {GPU: 1, Figure: Figure{Value: 256, Samples: 100, ReqS: 1}}}, true, llm,
			[]int{1}, false, "50.0 % below"},
		{"TTFT spread 20 ms is not material", "ttft_p95_ms", reqCells(100, 40, 60), false, llm, nil, false, "not material"},
		{"TTFT spread exactly 25 ms is not material", "ttft_p95_ms", reqCells(100, 50, 75), false, llm, nil, false, "≤ 25 ms"},
		{"TTFT spread 30 ms and 30 % flags", "ttft_p95_ms", reqCells(100, 100, 130), false, llm, []int{1}, false, "30.0 % above"},
		{"ITL has no ms floor", "itl_p95_ms", reqCells(100, 10, 13), false, llm, []int{1}, false, "30.0 % above"},
		{"seed: a lower-bound (truncated) sweep suppresses the throughput flag", "output_tok_s_peak",
			[]Cell{{GPU: 0, Figure: Figure{Value: 2807, Samples: 900, ReqS: 11}}, {GPU: 1, Figure: Figure{Value: 1467, Samples: 700, ReqS: 5.7, LowerBound: true}}}, true, llm,
			nil, false, "lower bound"},
		{"the same without lower bound flags", "output_tok_s_peak",
			[]Cell{{GPU: 0, Figure: Figure{Value: 2807, Samples: 900, ReqS: 11}}, {GPU: 1, Figure: Figure{Value: 1467, Samples: 700, ReqS: 5.7}}}, true, llm,
			[]int{1}, false, "47.7 % below"},
		{"sync latency stays compared on a lower-bound GPU", "ttft_p95_ms",
			[]Cell{{GPU: 0, Figure: Figure{Value: 40, Samples: 900}}, {GPU: 1, Figure: Figure{Value: 90, Samples: 700, LowerBound: true}}}, false, llm,
			[]int{1}, false, "125.0 % above"},
		{"a lower-bound best still flags the slower card", "sustained_req_s",
			[]Cell{{GPU: 0, Figure: Figure{Value: 10, Samples: 900, ReqS: 10, LowerBound: true}}, {GPU: 1, Figure: Figure{Value: 6, Samples: 700, ReqS: 6}}}, true, llm,
			[]int{1}, false, "40.0 % below"},
		{"overlapping confidence intervals: inside the noise", "ttft_p95_ms",
			[]Cell{{GPU: 0, Figure: Figure{Value: 100, Samples: 100, CI: ci(60, 160)}}, {GPU: 1, Figure: Figure{Value: 150, Samples: 100, CI: ci(110, 200)}}}, false, llm,
			nil, false, "confidence intervals overlap"},
		{"disjoint confidence intervals flag", "ttft_p95_ms",
			[]Cell{{GPU: 0, Figure: Figure{Value: 100, Samples: 100, CI: ci(90, 110)}}, {GPU: 1, Figure: Figure{Value: 150, Samples: 100, CI: ci(140, 160)}}}, false, llm,
			[]int{1}, false, "50.0 % above"},
		{"one-sided CI does not count", "ttft_p95_ms",
			[]Cell{{GPU: 0, Figure: Figure{Value: 100, Samples: 100, CI: ci(60, 160)}}, {GPU: 1, Figure: Figure{Value: 150, Samples: 100}}}, false, llm,
			[]int{1}, false, "50.0 % above"},
		{"GEMM 22 % below is within 25 %", "sgemm_fp32", []Cell{{GPU: 0, Figure: Figure{Value: 50}}, {GPU: 1, Figure: Figure{Value: 39}}}, true, gemm,
			nil, false, "within 25 %"},
		{"GEMM 28 % below flags, no sample guard for GEMM", "sgemm_fp32", []Cell{{GPU: 0, Figure: Figure{Value: 50}}, {GPU: 1, Figure: Figure{Value: 36}}, {GPU: 2, Figure: Figure{Value: 50}}},
			true, LLMGuards(), []int{1}, false, "28.0 % below"},
		{"single GPU: nothing to compare", "sustained_req_s", reqCells(400, 10), true, llm, nil, false, "single GPU"},
		{"NaN is left out", "itl_p95_ms", []Cell{{GPU: 0, Figure: Figure{Value: 10, Samples: 100}}, {GPU: 1, Figure: Figure{Value: math.NaN(), Samples: 100}}, {GPU: 2, Figure: Figure{Value: 20, Samples: 100}}},
			false, llm, []int{2}, false, "gpu 1 has no finite value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := GPUs(tc.metric, tc.cells, tc.higher, tc.g)
			if c.LowConfidence != tc.lowConf {
				t.Errorf("LowConfidence = %v, want %v (note %q)", c.LowConfidence, tc.lowConf, c.Note)
			}
			want := map[int]bool{}
			for _, g := range tc.flagged {
				want[g] = true
			}
			var text []string
			for _, v := range c.Values {
				if v.Flagged != want[v.GPU] {
					t.Errorf("gpu %d flagged = %v, want %v (reason %q)", v.GPU, v.Flagged, want[v.GPU], v.Reason)
				}
				text = append(text, v.Reason)
			}
			text = append(text, c.Note)
			if all := strings.Join(text, " | "); !strings.Contains(all, tc.reason) {
				t.Errorf("reasons %q do not mention %q", all, tc.reason)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Errorf("comparison does not encode: %v", err)
			}
		})
	}
}

func TestCompareGPUsBestAndDelta(t *testing.T) {
	c := GPUs("ttft_p95_ms", reqCells(100, 80, 40, 60), false, LLMGuards())
	if c.Best != 40 {
		t.Fatalf("best = %v, want 40 (lower is better)", c.Best)
	}
	want := []float64{100, 0, 50}
	for i, v := range c.Values {
		if math.Abs(v.DeltaPct-want[i]) > 1e-9 {
			t.Errorf("gpu %d delta = %v, want %v", v.GPU, v.DeltaPct, want[i])
		}
	}
	if !c.Values[0].Flagged || c.Values[2].Flagged {
		t.Errorf("want gpu 0 flagged (80 vs 40, +40 ms) and gpu 2 not (60 vs 40, 20 ms ≤ 25 ms): %+v", c.Values)
	}
	if !strings.Contains(c.Values[0].Reason, "check this card") {
		t.Errorf("a flag reason must say what to do: %q", c.Values[0].Reason)
	}
}

func TestOutlier(t *testing.T) {
	tests := []struct {
		v, best float64
		higher  bool
		pct     float64
		want    bool
	}{
		{79.9, 100, true, 20, true}, {80, 100, true, 20, false}, {120, 100, false, 20, false},
		{120.1, 100, false, 20, true}, {74, 100, true, 25, true}, {76, 100, true, 25, false},
	}
	for _, tc := range tests {
		if got := Outlier(tc.v, tc.best, tc.higher, tc.pct); got != tc.want {
			t.Errorf("Outlier(%v, %v, %v, %v) = %v, want %v", tc.v, tc.best, tc.higher, tc.pct, got, tc.want)
		}
	}
}

func TestCIOverlap(t *testing.T) {
	tests := []struct {
		a, b *results.Interval
		want bool
	}{
		{ci(1, 2), ci(2, 3), true}, {ci(1, 2), ci(2.1, 3), false}, {ci(3, 4), ci(1, 5), true},
		{nil, ci(1, 2), false}, {ci(1, 2), nil, false},
	}
	for _, tc := range tests {
		if got := CIOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("CIOverlap(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
