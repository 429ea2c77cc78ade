package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// The HTTP server and the virtual-time driver take a request through the same frontend and engine
// path, so a client at concurrency 1 sees the same TTFT from both: never less over HTTP (by more
// than a timer's slack), and more only by what the HTTP side adds, the loopback round trip and timer
// wake-ups: up to 3 ms, on a shared machine busy with other tests (1.1 ms seen in CI beside the
// real-node tests). A path that counted the prompt's prefill twice would add ~10 ms. Minimum of a
// few tries: this machine is shared.
func TestHTTPTTFTEqualsVirtual(t *testing.T) {
	for _, chat := range []bool{false, true} {
		// The same prompt ten times: without prefix caching, or the tries after the first skip
		// their prefill.
		s := start(t, Config{GPU: "H100", Model: "Qwen/Qwen3-8B", Seed: 1, Engine: EngineConfig{NoPrefixCache: true}})
		prompt := strings.Repeat("benchmark words for the prompt ", 60)
		n := Count(prompt)
		body := map[string]any{"model": "Qwen/Qwen3-8B", "prompt": prompt, "max_tokens": 8, "ignore_eos": true, "stream": true,
			"stream_options": map[string]any{"include_usage": true}}
		url := s.URL() + "/v1/completions"
		if chat {
			body = map[string]any{"model": "Qwen/Qwen3-8B", "messages": []any{map[string]any{"role": "user", "content": prompt}},
				"max_tokens": 8, "ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}}
			url = s.URL() + "/v1/chat/completions"
		}
		best := time.Hour
		var promptToks int
		for range 10 {
			r := streamReq(t, url, body)
			ce := r.contentEvents()
			if r.status != 200 || len(ce) == 0 {
				t.Fatalf("status %d, %d content events", r.status, len(ce))
			}
			best = min(best, ce[0].at)
			if u, ok := r.events[len(r.events)-1].obj["usage"].(map[string]any); ok {
				promptToks = int(u["prompt_tokens"].(float64))
			}
		}
		if promptToks < n {
			t.Fatalf("usage.prompt_tokens %d, want ≥ %d", promptToks, n)
		}
		g, _ := catalog.Builtin().LookupGPU("H100")
		m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
		p, err := NewPerf(g, m, EngineConfig{})
		if err != nil {
			t.Fatal(err)
		}
		v := RunVirtual(p, Workload{Concurrency: 1, Requests: 1, Prompt: promptToks, Output: 8, Chat: chat})
		want := v.TTFT[0]
		t.Logf("chat=%v prompt %d tokens: HTTP TTFT %v, virtual %v", chat, promptToks, best.Round(10*time.Microsecond), want.Round(10*time.Microsecond))
		if d := best - want; d < -time.Millisecond || d > 3*time.Millisecond {
			t.Errorf("chat=%v: HTTP TTFT %v, virtual driver %v: not within [-1 ms, +3 ms] of it", chat, best, want)
		}
	}
}

func TestFrontendEntry(t *testing.T) {
	f := DefaultFrontend()
	if f.Entry(1000, false) <= f.Entry(10, false) {
		t.Error("a longer prompt must take longer to tokenise")
	}
	if f.Entry(100, true)-f.Entry(100, false) != f.ChatTemplate {
		t.Error("chat adds the template, completions do not")
	}
	g, _ := catalog.Builtin().LookupGPU("H100")
	m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
	p, _ := NewPerf(g, m, EngineConfig{APIOverhead: 2 * time.Millisecond})
	if p.Entry(5000, true) != 2*time.Millisecond || p.Exit() != 0 {
		t.Error("--api-overhead replaces the modelled frontend")
	}
}

// An architecture the simulator has no figures for is an error, not Hopper's figures.
func TestUnknownArchitecture(t *testing.T) {
	m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
	g := catalog.GPU{Key: "X", Architecture: "Rubin", MemoryGiB: 200, BF16TFLOPS: 4000, HBMGBps: 13000}
	if _, err := NewPerf(g, m, EngineConfig{}); err == nil || !strings.Contains(err.Error(), "Rubin") {
		t.Fatalf("want an error naming the architecture, got %v", err)
	}
	g.MFU, g.MBU = 0.7, 0.8
	if _, err := NewPerf(g, m, EngineConfig{}); err != nil {
		t.Fatalf("with mfu/mbu in the catalog entry it should work: %v", err)
	}
	for _, gpu := range catalog.Builtin().GPUs() {
		if _, err := NewPerf(gpu, m, EngineConfig{TP: 1, MaxModelLen: 4096}); err != nil {
			t.Errorf("catalog GPU %s: %v", gpu.Key, err)
		}
	}
}
