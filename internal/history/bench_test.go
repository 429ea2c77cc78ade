package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/history/historytest"
)

// The history's speed targets (issue 47; docs/history.md has the figures): a 1,000-node × 8-GPU
// fleet run is written in at most 5 s, and a node's trend over 100 runs is read in under 100 ms,
// on both stores. Run: go test -run '^$' -bench . -benchtime 3x ./internal/history/ (with
// GPUVET_TEST_PG_URL for PostgreSQL).

// BenchmarkRecordFleet1000x8 records one run of 1,000 nodes × 8 GPUs (every microbenchmark, the
// burn, every LLM figure, power: about 150,000 rows) per iteration.
func BenchmarkRecordFleet1000x8(b *testing.B) {
	for _, k := range historytest.Kinds {
		b.Run(k.Name, func(b *testing.B) {
			st := mustOpen(b, k.Fresh(b))
			t0 := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := synth(fmt.Sprintf("fleet-%d", i), t0.Add(time.Duration(i)*time.Hour), 1000, 8, 1, uuidOf)
				b.StartTimer()
				stats, err := st.Record(ctx, s, "fp", 365)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(stats.Figures), "figures")
			}
		})
	}
}

// BenchmarkTrendNode100Runs reads one node's trend over its 100 newest runs, from a store holding
// 100 runs of 20 nodes × 8 GPUs.
func BenchmarkTrendNode100Runs(b *testing.B) {
	for _, k := range historytest.Kinds {
		b.Run(k.Name, func(b *testing.B) {
			st := mustOpen(b, k.Fresh(b))
			t0 := time.Now().Add(-200 * time.Hour)
			for r := 0; r < 100; r++ {
				if _, err := st.Record(ctx, synth(fmt.Sprintf("run-%03d", r), t0.Add(time.Duration(r)*time.Hour), 20, 8, 1, uuidOf), "fp", 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pts, err := st.Trend(ctx, "node-0007", "", "fp", 100)
				if err != nil || len(pts) != 100 {
					b.Fatalf("%v: %d points", err, len(pts))
				}
			}
		})
	}
}
