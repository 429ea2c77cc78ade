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

// A launch template that does not pass max_model_len serves a longer context than configured: the
// overflow test must size its prompt from what the server reports in /v1/models, not from the plan.
func TestOverflowSizedFromTheServedContext(t *testing.T) {
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Engine: sim.EngineConfig{MaxModelLen: 16384}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := Run(context.Background(), Options{URL: srv.URL(), Model: "Qwen/Qwen3-8B", MaxModelLen: 1024})
	for _, ft := range r.Tests {
		if ft.Name == ContextOverflow4xx && !ft.Passed {
			t.Fatalf("overflow test sized from the configured 1024, not the served 16384: %s", ft.Detail)
		}
	}
	if r.Status != results.StatusOK {
		t.Fatalf("status %s: %+v", r.Status, r.Tests)
	}
}
