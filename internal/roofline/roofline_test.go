package roofline

import (
	"math"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

func lookup(t *testing.T, gpu, model string) (catalog.GPU, catalog.Model) {
	t.Helper()
	g, ok := catalog.LookupGPU(gpu)
	if !ok {
		t.Fatalf("no GPU %s in the catalog", gpu)
	}
	m, ok := catalog.LookupModel(model)
	if !ok {
		t.Fatalf("no model %s in the catalog", model)
	}
	return g, m
}

// Figures worked by hand from the datasheet (H200: 4800 GB/s, 989.4 TFLOP/s BF16) and Qwen3-8B's
// config (8.19e9 parameters in BF16 = 16.38 GB; KV 147,456 bytes per token).
func TestOutputTokPerSecBound(t *testing.T) {
	g, m := lookup(t, "H200", "Qwen/Qwen3-8B")
	for _, c := range []struct {
		name  string
		tp    int
		s     Serving
		want  float64
		limit string
	}{
		// One sequence, one token of context: the weights once per token, 16.38e9 B ÷ 4.8e12 B/s.
		{"batch 1", 1, Serving{Batch: 1, PromptTokens: 0, OutputTokens: 2}, 1 / ((16.38e9 + 147456) / 4.8e12), "memory"},
		{"batch 1, tp 2", 2, Serving{Batch: 1, PromptTokens: 0, OutputTokens: 2}, 2 / ((16.38e9 + 147456) / 4.8e12), "memory"},
		// 256 × (1000 in, 1000 out): mean context 1500, KV 256×1500×147456 = 56.62 GB on top of the
		// weights: 73.00 GB ÷ 4.8 TB/s = 15.21 ms per step of 256 tokens.
		{"batch 256", 1, Serving{Batch: 256, PromptTokens: 1000, OutputTokens: 1000}, 256 / ((16.38e9 + 384000*147456.0) / 4.8e12), "memory"},
		// 4096 × (8000 in, 8 out): 1000 prefill tokens per output token make it compute-bound.
		{"prefill heavy", 1, Serving{Batch: 4096, PromptTokens: 8000, OutputTokens: 8},
			4096 / ((2*8.19e9*(4096+4096*1000) + 4*36*4096*(4096*8004+4096*1000*4000.0)) / 989.4e12), "compute"},
	} {
		got, cost := OutputTokPerSecBound(g, m, c.tp, c.s)
		if math.Abs(got-c.want)/c.want > 1e-9 {
			t.Errorf("%s: bound %.6g tok/s, want %.6g", c.name, got, c.want)
		}
		if cost.Limit() != c.limit {
			t.Errorf("%s: limit %s, want %s (%+v)", c.name, cost.Limit(), c.limit, cost)
		}
	}
	if v, _ := OutputTokPerSecBound(g, m, 1, Serving{}); v != 0 {
		t.Errorf("no batch: want 0 (unknown), got %v", v)
	}
}

// A larger batch never lowers the bound, and a faster card never lowers it.
func TestBoundMonotone(t *testing.T) {
	g, m := lookup(t, "H100", "Qwen/Qwen3-0.6B")
	h, _ := lookup(t, "H200", "Qwen/Qwen3-0.6B")
	prev := 0.0
	for b := 1.0; b <= 1024; b *= 2 {
		s := Serving{Batch: b, PromptTokens: 256, OutputTokens: 128}
		v, _ := OutputTokPerSecBound(g, m, 1, s)
		if v < prev {
			t.Errorf("batch %v: bound %v below batch %v's %v", b, v, b/2, prev)
		}
		if w, _ := OutputTokPerSecBound(h, m, 1, s); w < v {
			t.Errorf("batch %v: H200 bound %v below H100's %v", b, w, v)
		}
		prev = v
	}
}
