package roofline

import (
	"math"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g (±%.1f %%)", what, got, want, tol*100)
	}
}

func lookup(t *testing.T, gpu, model string) (catalog.GPU, catalog.Model) {
	t.Helper()
	g, ok := catalog.LookupGPU(gpu)
	m, ok2 := catalog.LookupModel(model)
	if !ok || !ok2 {
		t.Fatalf("catalog lacks %s or %s", gpu, model)
	}
	return g, m
}

// The embedding lookup is not a multiply: an untied model drops vocab × hidden, a tied one keeps it
// (its LM head multiplies by the same table).
func TestMatmulParams(t *testing.T) {
	_, q8 := lookup(t, "H100", "Qwen/Qwen3-8B")
	near(t, "Qwen3-8B", MatmulParams(q8), 8.19e9-151936*4096, 1e-9)
	_, q3 := lookup(t, "H100", "Qwen/Qwen2.5-3B-Instruct")
	near(t, "Qwen2.5-3B (tied)", MatmulParams(q3), 3.09e9, 1e-9)
}

// Hand-computed bounds for Llama-3.1-8B on one H100 (989.4 TFLOP/s, 3350 GB/s).
func TestBoundsByHand(t *testing.T) {
	g, m := lookup(t, "H100", "meta-llama/Llama-3.1-8B-Instruct")
	mp := 8.03e9 - 128256*4096.0 // 7.5047e9
	kv := 2 * 32 * 8 * 128 * 2.0 // 131072 B/token

	// Decode, B = 1 at context 1000: memory bound, weights + 1000 tokens of KV.
	s := DecodeStep(1, 1000)
	near(t, "decode bytes", Bytes(m, s), mp*2+1000*kv, 1e-9)
	near(t, "decode FLOPs", FLOPs(m, s), 2*mp+4*32*32*128*1000, 1e-9)
	if ComputeBound(g, m, s, 1) {
		t.Error("single-stream decode must be memory bound")
	}
	wantTokS := 1 / ((mp*2 + 1000*kv) / 3350e9) // ≈ 222 tok/s
	near(t, "decode tok/s B=1", DecodeTokS(g, m, 1, 1000, 1), wantTokS, 1e-9)

	// Prefill of 4096 tokens: compute bound.
	p := PrefillStep(4096)
	wantFLOPs := 2*mp*4096 + 4*32*32*128*4096.0*4096/2
	near(t, "prefill FLOPs", FLOPs(m, p), wantFLOPs, 1e-9)
	if !ComputeBound(g, m, p, 1) {
		t.Error("a 4096-token prefill must be compute bound")
	}
	near(t, "prefill seconds", PrefillSeconds(g, m, 4096, 1), wantFLOPs/989.4e12, 1e-9)

	// TP splits both bounds evenly.
	near(t, "tp=4 step", StepSeconds(g, m, s, 4), StepSeconds(g, m, s, 1)/4, 1e-9)

	// Decode throughput rises with batch while memory bound, and its gain flattens once compute
	// bound: B=1 → 64 is nearly ×64, B=1024 → 4096 is well under ×4 at long context.
	if r := DecodeTokS(g, m, 64, 1000, 1) / DecodeTokS(g, m, 1, 1000, 1); r < 20 {
		t.Errorf("B=64 / B=1 decode = ×%.1f, want a large gain (weights amortised)", r)
	}
	if r := DecodeTokS(g, m, 4096, 1000, 1) / DecodeTokS(g, m, 1024, 1000, 1); r > 2 {
		t.Errorf("B=4096 / B=1024 decode = ×%.2f: KV reads should dominate", r)
	}
}

func TestAllReduce(t *testing.T) {
	g, m := lookup(t, "H100", "meta-llama/Llama-3.1-70B-Instruct")
	link := g.TPLink()
	if link.GBps != 450 {
		t.Fatalf("H100 link %+v, want NVLink4 450 GB/s", link)
	}
	msg := AllReduceBytes(m, 256) // 256 × 8192 × 2 = 4 MiB
	near(t, "message", msg, 256*8192*2, 1e-12)
	want := 2*3.0/4*msg/450e9 + link.LatencyUs/1e6
	near(t, "all-reduce tp=4", AllReduceSeconds(link, msg, 4), want, 1e-9)
	near(t, "step comm tp=4", TPStepCommSeconds(link, m, 256, 4), 160*want, 1e-9)
	if AllReduceSeconds(link, msg, 1) != 0 {
		t.Error("tp=1 has no all-reduce")
	}
	// A card without NVLink talks over PCIe: slower for the same message.
	l, _ := catalog.LookupGPU("L40S")
	if pl := l.TPLink(); !(AllReduceSeconds(pl, msg, 4) > 5*AllReduceSeconds(link, msg, 4)) {
		t.Errorf("PCIe all-reduce (%+v) should be far slower than NVLink", pl)
	}
}
