package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestWorkloadCharts(t *testing.T) {
	pre, none, exp := 4.0, 0.0, 0.7
	ladder := &results.Load{Context: &results.ContextLadder{Concurrency: 4, LongestClean: 4096, FirstPreempting: 8096},
		Runs:   []results.Run{{ContextTokens: 4096, TTFT: results.Dist{Count: 8, P50: 1700}, Preemptions: &none}, {ContextTokens: 8096, TTFT: results.Dist{Count: 8, P50: 7500}, Preemptions: &pre}},
		Server: &results.ServerMetrics{PrefixCache: &results.PrefixCache{QueriedTokens: 1000, HitTokens: 100, HitRate: 0.1, Expected: &exp}}}
	m := results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{0}, Load: ladder}}}
	charts := workloadCharts(m)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want the context ladder's and the prefix cache's", len(charts))
	}
	if c := string(charts[0]); !strings.Contains(c, "TTFT p50 vs context length") || !strings.Contains(c, "8096 tokens × 4 streams, TTFT p50 7,500 ms, 4 preemptions") {
		t.Errorf("context chart lacks its points: %.300s", c)
	}
	// An engine that holds requests back instead of preempting: the rung is marked the same.
	held, full := 0.7, 0.93
	ladder.Runs[1].Preemptions, ladder.Runs[1].HeldShare, ladder.Runs[1].KVUsageMax = &none, &held, &full
	if c := string(workloadCharts(m)[0]); !strings.Contains(c, "8096 tokens × 4 streams, TTFT p50 7,500 ms, requests held back for KV cache 70 % of the rung") {
		t.Errorf("held-back rung not said: %.300s", c)
	}
	if c := string(charts[1]); !strings.Contains(c, "10.0 % of 1000 prompt tokens hit") || !strings.Contains(c, "70.0 % expected") {
		t.Errorf("prefix chart lacks its points: %.300s", c)
	}
	if got := workloadCharts(results.Model{Endpoints: []results.Endpoint{{GPUs: []int{0}, Load: &results.Load{}}}}); len(got) != 0 {
		t.Errorf("the seed's workload got %d workload charts", len(got))
	}
}
