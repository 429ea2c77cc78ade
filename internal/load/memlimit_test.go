package load

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestMemoryLimitAndStreams(t *testing.T) {
	if got := MemoryLimit(10); got != 256<<20 {
		t.Errorf("small run: %d, want the 256 MiB floor", got)
	}
	if got, want := MemoryLimit(10_000), int64(64<<20+10_000*48<<10); got != want {
		t.Errorf("10k streams: %d, want %d", got, want)
	}
	for _, c := range []struct {
		cfg  results.LoadConfig
		want int
	}{
		{results.LoadConfig{Profile: "synchronous"}, 1},
		{results.LoadConfig{Profile: "concurrency", Concurrency: 300}, 300},
		{results.LoadConfig{Profile: "throughput", MaxConcurrency: 64}, 64},
		{results.LoadConfig{Profile: "sweep", MaxConcurrency: 512}, 2048},
	} {
		if got := Streams(Options{Config: c.cfg}); got != c.want {
			t.Errorf("%+v: %d streams, want %d", c.cfg, got, c.want)
		}
	}
}
