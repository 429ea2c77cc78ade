package sim

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// BenchmarkRunVirtual is the cost of simulating a serving run in virtual time: an H100 serving
// Qwen3-8B to 256 streams, 2,048 requests of 128/128 tokens (about 20 s of simulated serving).
func BenchmarkRunVirtual(b *testing.B) {
	g, _ := catalog.Builtin().LookupGPU("H100")
	m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
	p, err := NewPerf(g, m, EngineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	var simulated float64
	for b.Loop() {
		r := RunVirtual(p, Workload{Concurrency: 256, Prompt: 128, Output: 128, Requests: 2048})
		simulated += r.Duration.Seconds()
	}
	b.ReportMetric(simulated/b.Elapsed().Seconds(), "sim-s/s")
}
