package sim

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

func perfFor(t *testing.T, gpu, model string, tp int) *Perf {
	t.Helper()
	g, ok := catalog.LookupGPU(gpu)
	m, ok2 := catalog.LookupModel(model)
	if !ok || !ok2 {
		t.Fatalf("catalog lacks %s or %s", gpu, model)
	}
	p, err := NewPerf(g, m, EngineConfig{TP: tp, MaxModelLen: 8192})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Tensor parallelism: more GPUs shorten a decode step, but by less than the GPU count (all-reduces,
// kernel gaps that do not shrink), and the same split over PCIe costs more than over NVLink.
func TestTPScaling(t *testing.T) {
	decode := Batch{Tokens: 64, Seqs: 64, AttnCtx: 64 * 1000, KVRead: 64 * 1000}
	t4 := perfFor(t, "H100", "meta-llama/Llama-3.1-70B-Instruct", 4).StepTime(decode)
	t8 := perfFor(t, "H100", "meta-llama/Llama-3.1-70B-Instruct", 8).StepTime(decode)
	if !(t8 < t4 && float64(t8) > 0.5*float64(t4)*1.1) {
		t.Errorf("70B decode step tp=8 %v vs tp=4 %v: want faster, but well short of twice", t8, t4)
	}
	nv := perfFor(t, "H100", "meta-llama/Llama-3.1-8B-Instruct", 2)
	pcie := perfFor(t, "H100-PCIE", "meta-llama/Llama-3.1-8B-Instruct", 2)
	prefill := Batch{Tokens: 4096, Seqs: 1, AttnCtx: 4096 * 2048, KVRead: 4096}
	if c, p := nv.comm(prefill.Tokens), pcie.comm(prefill.Tokens); !(p > 3*c) {
		t.Errorf("4096-token all-reduces over PCIe %.2f ms should cost far more than over NVLink %.2f ms", p*1e3, c*1e3)
	}
}

// A small prefill uses the GPU less well than a big one: time per token falls with the step's size
// until the GEMMs fill every SM, then stays flat.
func TestShapeEfficiency(t *testing.T) {
	p := perfFor(t, "H100", "meta-llama/Llama-3.1-8B-Instruct", 1)
	perTok := func(n int) float64 {
		b := Batch{Tokens: n, Seqs: 1, AttnCtx: float64(n) * float64(n) / 2, KVRead: float64(n)}
		return float64(p.StepTime(b)) / float64(n)
	}
	if !(perTok(128) > 1.5*perTok(2048)) {
		t.Errorf("per-token cost of a 128-token prefill %.0f ns should be well above a 2048-token one %.0f ns", perTok(128), perTok(2048))
	}
	g, _ := catalog.LookupGPU("H100")
	m, _ := catalog.LookupModel("meta-llama/Llama-3.1-8B-Instruct")
	if f := waveFill(g, m, 8192, 1); f < 0.95 {
		t.Errorf("an 8192-token step should fill the SMs, fill %.2f", f)
	}
	if f1, f8 := waveFill(g, m, 256, 1), waveFill(g, m, 256, 8); f8 >= f1 {
		t.Errorf("narrower per-GPU GEMMs under tp=8 should fill fewer SMs (%.2f vs %.2f)", f8, f1)
	}
}
