package history

import (
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/history/historytest"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A retention longer than time.Duration holds (about 292 years) keeps every run: before, the
// days were multiplied into a time.Duration that wrapped negative, the cut-off fell in the future,
// and recording one run deleted every run of the history that was no acceptance.
func TestHugeRetentionKeepsEveryRun(t *testing.T) {
	st := mustOpen(t, historytest.SQLite(t))
	s := synth("last-week", time.Now().Add(-7*24*time.Hour), 1, 1, 1, uuidOf)
	s.Complete, s.Status = false, results.StatusInterrupted // no acceptance: retention may drop it
	if _, err := st.Record(ctx, s, "fp", 0); err != nil {
		t.Fatal(err)
	}
	for _, days := range []int{200_000, 1 << 62} {
		if _, err := st.Record(ctx, synth("now", time.Now(), 1, 1, 1, uuidOf), "fp", days); err != nil {
			t.Fatal(err)
		}
		if n := count(t, st, `SELECT COUNT(*) FROM runs WHERE id = ?`, "last-week"); n != 1 {
			t.Fatalf("retention_days %d dropped a run of last week", days)
		}
	}
}
