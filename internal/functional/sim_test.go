package functional

import (
	"context"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// The simulator is a well-behaved OpenAI-compatible server (vLLM's shapes): every test passes.
func TestSuiteAgainstTheSimulator(t *testing.T) {
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Engine: sim.EngineConfig{MaxModelLen: 1024}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := Run(context.Background(), Options{URL: srv.URL(), Model: "Qwen/Qwen3-8B", MaxModelLen: 1024})
	if r.Status != results.StatusOK {
		for _, ft := range r.Tests {
			t.Logf("%s: passed=%v %s", ft.Name, ft.Passed, ft.Detail)
		}
		t.Fatalf("status %s: %s", r.Status, r.Error)
	}
}
