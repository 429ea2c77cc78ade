package term

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The Repeat block names, per model, each figure's widest spread between blocks and its GPU.
func TestRepeatLinesNameTheWidestSpread(t *testing.T) {
	ep := func(gpu int, itl float64) results.Endpoint {
		return results.Endpoint{GPUs: []int{gpu}, Load: &results.Load{Runs: []results.Run{{Kind: "synchronous",
			Repeat: &results.Repeat{Blocks: 3, Figures: []results.FigureRepeat{{Figure: "itl_p95_ms", SpreadPct: itl}, {Figure: "tpot_p50_ms", SpreadPct: 0.4}}}}}}}
	}
	s := &results.Summary{Hosts: []results.Host{{Name: "n", Models: []results.Model{{Model: "m", Endpoints: []results.Endpoint{ep(0, 2.5), ep(1, 31.2), ep(2, 4)}}}}}}
	got := strings.Join(repeatLines(s), "\n")
	if !strings.Contains(got, "m: spread between the synchronous rung's 3 blocks") || !strings.Contains(got, "itl_p95_ms 31.2 % (gpu 1)") || !strings.Contains(got, "tpot_p50_ms 0.4 %") {
		t.Errorf("repeat lines:\n%s", got)
	}
	s.Hosts[0].Models[0].Endpoints = []results.Endpoint{{GPUs: []int{0}, Load: &results.Load{Runs: []results.Run{{Kind: "synchronous"}}}}}
	if l := repeatLines(s); len(l) != 0 {
		t.Errorf("a rung not in blocks: %q", l)
	}
}
