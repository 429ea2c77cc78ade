package sim

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// -update rewrites docs/sim-validation.md from the table below; without it the test fails when the
// file differs from what the code computes, so the document cannot drift from the model.
var updateDoc = flag.Bool("update", false, "rewrite docs/sim-validation.md")

// A published measurement: vLLM or SGLang, BF16, a named GPU, model, TP, lengths and load.
type measurement struct {
	source string // address of the published figure
	engine string // what produced it
	gpu    string
	model  string
	tp     int
	w      Workload
	note   string // how the workload was reproduced
	metric string // "tok/s", "TPOT ms", "TTFT ms", "E2E ms"
	value  float64
	fit    bool // used to set a constant of the model (else held out)
	ctx    int  // the engine's max_model_len (0: 4096, as the sources that cap it)
}

const (
	srcNightlyH200 = "https://buildkite.com/vllm/performance-benchmark/builds/9515"
	srcNightlyH100 = "https://buildkite.com/elastic/enterprise-search-ruby/builds/571"
	srcSGLang060   = "https://github.com/sgl-project/sglang/blob/main/benchmark/benchmark_vllm_060/README.md"
	// GPUStack's performance lab: vLLM v0.11.0 as `vllm serve Qwen/Qwen3-14B` (BF16, every default:
	// max_model_len 40960) on one H100 SXM, `vllm bench serve --backend openai-chat --dataset-name
	// random`, every prompt sent at once; long prompts, so prefill and its attention dominate.
	srcGPUStack14B = "https://github.com/gpustack/gpustack/blob/main/docs/performance-lab/qwen3-14b/h100.md"
)

// randomAtOnce is vllm bench serve's random dataset, n prompts of in/out tokens sent at once
// through the chat endpoint.
func randomAtOnce(n, in, out int) Workload {
	return Workload{Concurrency: n, Requests: n, Prompt: in, Output: out, Chat: true}
}

// ShareGPT as sglang.bench_serving samples it, reduced to its means: 194 output tokens a request
// (the source's own offline rows: 3856 tok/s ÷ 19.84 req/s) and ~215 prompt tokens (vLLM's
// benchmark_serving on 1000 ShareGPT prompts with the Llama-3 tokenizer: 215,196 input tokens,
// vllm-project/vllm#7567).
const shareGPTIn, shareGPTOut = 215, 194

// shareGPT is the sources' online load: Poisson arrivals at rate, n requests, mean lengths.
func shareGPT(rate float64, n int) Workload {
	return Workload{Rate: rate, Poisson: true, Requests: n, Prompt: shareGPTIn, Output: shareGPTOut}
}

// offlineShareGPT is n ShareGPT prompts sent at once (benchmark_serving at an infinite rate).
func offlineShareGPT(n int) Workload {
	return Workload{Concurrency: n, Requests: n, Prompt: shareGPTIn, Output: shareGPTOut}
}

// latency is vLLM's nightly latency test: benchmark_latency, batch 8, 32 in / 128 out, offline.
var latency = Workload{Concurrency: 8, Requests: 8, Prompt: 32, Output: 128, Offline: true}

var measurements = []measurement{
	{srcNightlyH200, "vLLM nightly", "H200", "meta-llama/Llama-3.1-8B-Instruct", 1, latency, "benchmark_latency, batch 8, 32 in / 128 out", "E2E ms", 833.421, true, 0},
	{srcNightlyH200, "vLLM nightly", "H200", "meta-llama/Llama-3.1-70B-Instruct", 4, latency, "as above; the source runs Llama-3-70B (same shapes)", "E2E ms", 2077.53, true, 0},
	{srcSGLang060, "SGLang 0.3.0", "A100", "meta-llama/Llama-3.1-8B-Instruct", 1, shareGPT(4, 1200), "ShareGPT at 4 req/s as mean lengths, Poisson arrivals", "TTFT ms", 31.98, true, 0},
	{srcSGLang060, "SGLang 0.3.0", "A100", "meta-llama/Llama-3.1-8B-Instruct", 1, shareGPT(4, 1200), "as above", "TPOT ms", 13.17, true, 0},
	{srcSGLang060, "vLLM 0.6.0", "A100", "meta-llama/Llama-3.1-8B-Instruct", 1, offlineShareGPT(5000), "5000 ShareGPT prompts at once, as mean lengths", "tok/s", 4132.37, true, 0},

	{srcNightlyH100, "vLLM nightly", "H100", "meta-llama/Llama-3.1-8B-Instruct", 1, latency, "benchmark_latency, batch 8, 32 in / 128 out (the page is a stored copy of vLLM's performance-benchmark build under another pipeline's name)", "E2E ms", 997.542, false, 0},
	{srcNightlyH100, "vLLM nightly", "H100", "meta-llama/Llama-3.1-70B-Instruct", 4, latency, "as above; Llama-3-70B", "E2E ms", 2444.47, false, 0},
	{srcSGLang060, "SGLang 0.3.0", "A100", "meta-llama/Llama-3.1-8B-Instruct", 1, shareGPT(8, 2400), "ShareGPT at 8 req/s as mean lengths", "TTFT ms", 35.68, false, 0},
	{srcSGLang060, "SGLang 0.3.0", "A100", "meta-llama/Llama-3.1-8B-Instruct", 1, shareGPT(8, 2400), "as above", "TPOT ms", 17.85, false, 0},
	{srcSGLang060, "SGLang 0.3.0", "H100", "meta-llama/Llama-3.1-70B-Instruct", 4, shareGPT(4, 1200), "ShareGPT at 4 req/s as mean lengths", "TTFT ms", 53.94, false, 0},
	{srcSGLang060, "SGLang 0.3.0", "H100", "meta-llama/Llama-3.1-70B-Instruct", 4, shareGPT(4, 1200), "as above", "TPOT ms", 25.03, false, 0},
	{srcSGLang060, "SGLang 0.3.0", "H100", "meta-llama/Llama-3.1-70B-Instruct", 4, shareGPT(8, 2400), "ShareGPT at 8 req/s as mean lengths", "TTFT ms", 58.11, false, 0},
	{srcSGLang060, "SGLang 0.3.0", "H100", "meta-llama/Llama-3.1-70B-Instruct", 4, shareGPT(8, 2400), "as above", "TPOT ms", 33.07, false, 0},
	{srcSGLang060, "vLLM 0.6.0", "H100", "meta-llama/Llama-3.1-70B-Instruct", 4, offlineShareGPT(5000), "5000 ShareGPT prompts at once, as mean lengths", "tok/s", 3700.64, false, 0},
}

// longContext is a held-out context ladder (issue 54), 2K → 4K → 32K from one source, which the
// model misses in size (docs/sim-validation.md says by how much and why): reported in a table of
// its own and held to its shape, each rung's throughput as a share of the shortest context's.
var longContext = []measurement{
	{srcGPUStack14B, "vLLM 0.11.0", "H100", "Qwen/Qwen3-14B", 1, randomAtOnce(500, 2000, 100), "random dataset, 500 prompts of 2,000/100 tokens at once, chat endpoint, max_model_len 40960", "total tok/s", 10597.19, false, 40960},
	{srcGPUStack14B, "vLLM 0.11.0", "H100", "Qwen/Qwen3-14B", 1, randomAtOnce(500, 2000, 100), "as above", "TTFT ms", 49138.28, false, 40960},
	{srcGPUStack14B, "vLLM 0.11.0", "H100", "Qwen/Qwen3-14B", 1, randomAtOnce(500, 4000, 200), "500 prompts of 4,000/200 tokens at once (99,803 of 100,000 tokens generated: no --ignore-eos)", "total tok/s", 9218.03, false, 40960},
	{srcGPUStack14B, "vLLM 0.11.0", "H100", "Qwen/Qwen3-14B", 1, randomAtOnce(500, 4000, 200), "as above", "TTFT ms", 110734.54, false, 40960},
	{srcGPUStack14B, "vLLM 0.11.0", "H100", "Qwen/Qwen3-14B", 1, randomAtOnce(100, 32000, 100), "100 prompts of 32,000/100 tokens at once (9,855 of 10,000 generated)", "total tok/s", 8298.56, false, 40960},
	{srcGPUStack14B, "vLLM 0.11.0", "H100", "Qwen/Qwen3-14B", 1, randomAtOnce(100, 32000, 100), "as above", "TTFT ms", 191051.49, false, 40960},
}

// simulate runs the measurement's workload on the model and returns the figure it reports.
func (m measurement) simulate() (float64, error) {
	g, ok := catalog.Builtin().LookupGPU(m.gpu)
	mod, ok2 := catalog.Builtin().LookupModel(m.model)
	if !ok || !ok2 {
		return 0, fmt.Errorf("catalog lacks %s or %s", m.gpu, m.model)
	}
	// Most sources cap the context at 4096 (SGLang/vLLM --max-model-len 4096) or run short prompts.
	ctx := m.ctx
	if ctx == 0 {
		ctx = 4096
	}
	p, err := NewPerf(g, mod, EngineConfig{TP: m.tp, MaxModelLen: ctx})
	if err != nil {
		return 0, err
	}
	r := RunVirtual(p, m.w)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	switch m.metric {
	case "tok/s":
		return r.OutputTokS(), nil
	case "total tok/s": // prompt and output tokens over the run, as vllm bench serve's total
		return float64(m.w.Requests*m.w.Prompt+r.OutputTokens) / r.Duration.Seconds(), nil
	case "TPOT ms":
		return ms(Percentile(r.ITL, 50)), nil
	case "TTFT ms":
		return ms(Percentile(r.TTFT, 50)), nil
	case "E2E ms":
		var sum time.Duration
		for _, d := range r.E2E {
			sum += d
		}
		return ms(sum) / float64(len(r.E2E)), nil
	}
	return 0, fmt.Errorf("unknown metric %q", m.metric)
}

// ladderBound is the error the held-out ladder's shape must stay within: a ratio of two of the
// source's own figures, so tighter than a figure's bar.
const ladderBound = 0.15

// bound is the error the held-out half must stay within (issue 18's bar).
func bound(metric string) float64 {
	if metric == "TTFT ms" {
		return 0.40
	}
	return 0.30
}

func TestValidation(t *testing.T) {
	var fit, held bytes.Buffer
	for _, m := range measurements {
		got, err := m.simulate()
		if err != nil {
			t.Fatalf("%s %s: %v", m.gpu, m.model, err)
		}
		dev := (got - m.value) / m.value
		row := fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %+.0f %% |\n",
			m.engine, m.gpu, strings.TrimPrefix(strings.TrimPrefix(m.model, "meta-llama/"), "Qwen/"), m.tp, load(m.w), m.metric, link(m.source), num(m.value), num(got), dev*100)
		t.Logf("%-5s %-34s tp%d %-8s published %8.2f sim %8.2f (%+.0f %%)", m.gpu, m.model, m.tp, m.metric, m.value, got, dev*100)
		if m.fit {
			fit.WriteString(row)
			continue
		}
		held.WriteString(row)
		if math.Abs(dev) > bound(m.metric) {
			t.Errorf("held out: %s %s tp%d %s = %.2f, published %.2f (%+.0f %%, bound ±%.0f %%)", m.gpu, m.model, m.tp, m.metric, got, m.value, dev*100, bound(m.metric)*100)
		}
	}
	var missed, shape bytes.Buffer
	var base, baseSim float64 // the ladder's first rung: published and simulated total tok/s
	for _, m := range longContext {
		got, err := m.simulate()
		if err != nil {
			t.Fatalf("%s %s: %v", m.gpu, m.model, err)
		}
		fmt.Fprintf(&missed, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %+.0f %% |\n", m.engine, m.gpu, strings.TrimPrefix(m.model, "Qwen/"),
			m.tp, load(m.w), m.metric, link(m.source), num(m.value), num(got), (got-m.value)/m.value*100)
		if m.metric != "total tok/s" {
			continue
		}
		if base == 0 {
			base, baseSim = m.value, got
			continue
		}
		// The shape: each rung's throughput as a share of the shortest context's, which a constant
		// slowness of the source's serving stack cancels out of.
		pub, sim := m.value/base, got/baseSim
		fmt.Fprintf(&shape, "| %d/%d | %.3f | %.3f | %+.0f %% |\n", m.w.Prompt, m.w.Output, pub, sim, (sim-pub)/pub*100)
		if math.Abs(sim-pub)/pub > ladderBound {
			t.Errorf("held-out ladder: at %d tokens %s serves %.3f of its shortest context's throughput, the source %.3f (bound ±%.0f %%)", m.w.Prompt, m.model, sim, pub, ladderBound*100)
		}
	}
	var cal bytes.Buffer
	for _, c := range calibrationCases {
		got, err := runCalibration(c)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range c.want {
			fmt.Fprintf(&cal, "| %s | %s | %s | %s | %s | %s | %+.0f %% |\n", c.gpu, strings.TrimPrefix(c.model, "Qwen/"),
				load(c.w), f.name, num(f.target), num(got[i]), (got[i]-f.target)/f.target*100)
		}
	}
	var notes strings.Builder
	seen := map[string]bool{}
	for _, m := range append(measurements, longContext...) {
		if k := m.source + m.note; !seen[k] {
			seen[k] = true
			fmt.Fprintf(&notes, "- %s, %s %s on %s: %s.\n", m.source, m.engine, strings.TrimPrefix(m.model, "meta-llama/"), m.gpu, m.note)
		}
	}
	doc := renderValidationDoc(fit.String(), held.String(), missed.String(), shape.String(), cal.String(), notes.String())
	path := filepath.Join("..", "..", "docs", "sim-validation.md")
	if *updateDoc {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil || string(old) != doc {
		t.Errorf("%s is not what the model computes: run `go test ./internal/sim -run Validation -update`", path)
	}
}

func num(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

func load(w Workload) string {
	switch {
	case w.Offline:
		return fmt.Sprintf("offline batch %d, %d/%d", w.Concurrency, w.Prompt, w.Output)
	case w.Rate > 0:
		return fmt.Sprintf("%g req/s, %d/%d", w.Rate, w.Prompt, w.Output)
	}
	return fmt.Sprintf("%d at once, %d/%d", w.Concurrency, w.Prompt, w.Output)
}

func link(u string) string {
	name := u
	if i := strings.Index(u, "://"); i >= 0 {
		name = u[i+3:]
	}
	if len(name) > 40 {
		name = name[:40] + "…"
	}
	return "[" + name + "](" + u + ")"
}

func renderValidationDoc(fit, held, missed, shape, cal, notes string) string {
	var b strings.Builder
	b.WriteString(`# gpuvet sim: validation against published measurements

Generated by ` + "`go test ./internal/sim -run Validation -update`" + ` from the table in
internal/sim/validation_test.go; the same test without -update fails when this file differs from
what the model computes, and fails when a held-out figure is off by more than ±30 % (throughput,
TPOT, E2E) or ±40 % (TTFT).

Every figure is a published BF16 measurement with its address. Lengths are prompt/output tokens.
ShareGPT runs are reproduced with the dataset's mean lengths (215 in, 194 out) and seeded Poisson
arrivals at the source's rate; fixed lengths are an approximation (the sources draw each request's
lengths from the dataset, so long prompts and outputs add load the mean does not). TPOT is the
sim's median inter-token latency; TTFT the median; E2E the mean. SGLang rows are simulated as vLLM (same batching and the same kernels to first order).

## Fitted: these set constants of the model

| engine | GPU | model | TP | load | metric | source | published | sim | error |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`)
	b.WriteString(fit)
	b.WriteString(`
## Held out: never used to set anything

| engine | GPU | model | TP | load | metric | source | published | sim | error |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`)
	b.WriteString(held)
	b.WriteString(`
## Held out, and missed in size: a long-context ladder

One source's context ladder (issue 54): vLLM 0.11.0 serving Qwen3-14B in BF16 with every default
on one H100 SXM, ` + "`vllm bench serve`" + ` on random prompts, all sent at once. The simulator serves
every rung about twice as fast as the source; the test holds the ladder to its shape (each rung's
throughput as a share of the shortest context's, ±15 %), which a constant slowness of the source's
serving stack cancels out of.

| engine | GPU | model | TP | load | metric | source | published | sim | error |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`)
	b.WriteString(missed)
	b.WriteString(`
| prompt/output | published, share of 2000/100 | sim, share of 2000/100 | error |
| --- | --- | --- | --- |
`)
	b.WriteString(shape)
	b.WriteString(`
Why the size is missed, as far as it is known: the simulator is near the H100's roofline there
(a 2,000-token prompt alone: 23,300 tok/s, 86 ms, its GEMMs at the 79 % of the BF16 peak cuBLAS
reached on an H200), and the source is about half as fast at every length. The same page's other
rows are slower still against it where no long context is involved: 1,000 prompts of 128/4 tokens
at once ran at 44 req/s (5,797 tok/s; the simulator 27,385), so something in that serving stack,
not the GPU's arithmetic, set its pace. The other H100 rows above (short prompts, few at once) are
within 5 %.

This ladder found a fault of the simulator's, since fixed: at 32K with 100 prompts at once only
about 8 fit in the KV cache, and the simulator preempted 420 times (4.2 a request), each time
recomputing the whole prompt, since it cached a prompt's blocks only once the whole prompt was
computed: 6,703 tok/s, 0.30 of its 2K throughput against the source's 0.78. vLLM V1 caches each full
block as it is computed and keeps a freed one until an allocation reuses it, the least recently
freed first; the simulator now does the same, so a preempted request finds what it computed: 13
preemptions, 16,465 tok/s, 0.73 of its 2K throughput.
`)
	b.WriteString(`
## Calibration cases (internal/sim/calibration_test.go, held to ±25 %, fitted)

Public figures the simulator was first calibrated on: aicr inference-perf on an 8×H100 node and on
GB200 (Qwen3-8B, 128/128, 256 streams), and the ansible GPU benchmark's L40S reference table
(vLLM 0.17.1, Qwen2.5-3B-Instruct, 512/256).

| GPU | model | load | figure | published | sim | error |
| --- | --- | --- | --- | --- | --- | --- |
`)
	b.WriteString(cal)
	b.WriteString(`
## How each source was reproduced

`)
	b.WriteString(notes)
	b.WriteString(`
Known bias: TPOT under load (the ShareGPT rows at 4–8 req/s) comes out low. The sources' requests
vary in length, and a long prompt arriving stalls every running decode for its prefill, which the
mean-length reproduction does not show; the nightly single-batch rows have no such spread.

## Where each GPU's efficiency figures come from

`)
	for _, l := range ArchBasis(catalog.Builtin()) {
		b.WriteString("- " + l + "\n")
	}
	return b.String()
}
