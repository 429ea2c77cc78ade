package power

import (
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Volatile ECC counters (and the PCIe replay counter) restart from 0 when the GPU is reset or the
// driver reloads. A counter that reads lower after the load than before grew by at least what it
// reads after: the delta was negative (-3 for 5 → 2), and the judge, which flags a positive
// uncorrected delta, saw nothing on a GPU that was reset and then erred.
func TestCounterResetDuringTheLoad(t *testing.T) {
	before := gpu.ErrorCounts{ECCUncorrected: new(int64(5)), ECCCorrected: new(int64(10)), PCIeReplays: new(int64(7))}
	after := gpu.ErrorCounts{ECCUncorrected: new(int64(2)), ECCCorrected: new(int64(12)), PCIeReplays: new(int64(0))}
	var gt results.GPUTelemetry
	counterDeltas(&gt, before, after, time.Now())
	if gt.ECCUncorrected == nil || *gt.ECCUncorrected != 2 {
		t.Errorf("uncorrected 5 → 2 (reset): delta %v, want 2", deref(gt.ECCUncorrected))
	}
	if gt.ECCCorrected == nil || *gt.ECCCorrected != 2 {
		t.Errorf("corrected 10 → 12: delta %v, want 2", deref(gt.ECCCorrected))
	}
	if gt.PCIeReplays == nil || *gt.PCIeReplays != 0 {
		t.Errorf("replays 7 → 0 (reset): delta %v, want 0", deref(gt.PCIeReplays))
	}
	if gt.CountersNote == "" {
		t.Error("a counter reset during the load is not noted")
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A note of failed samples alone does not start with the separator.
func TestFailedSamplesNoteAlone(t *testing.T) {
	p := Summarise([]results.PowerSample{{PowerW: 300, UtilPct: 90}}, time.Second, 0, 2, errTest("nvml: timeout"))
	if p.Note != "2 samples failed (last: nvml: timeout)" {
		t.Errorf("note %q", p.Note)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
