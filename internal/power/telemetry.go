package power

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The GPU's own telemetry under the load (issue 33): every power sample of an endpoint's load is
// also kept per GPU, with its wall time, and at the end aligned to the load's rungs (the measured
// window of each results.Run) and bounded for the summary.

// Recorder keeps per-GPU samples of one load. Safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	gpus   []int
	series map[int][]stamped
}

type stamped struct {
	at time.Time
	s  results.PowerSample
}

// NewRecorder records the given GPUs.
func NewRecorder(gpus []int) *Recorder {
	return &Recorder{gpus: append([]int(nil), gpus...), series: map[int][]stamped{}}
}

// Add keeps one sample of GPU g read at at.
func (r *Recorder) Add(g int, s results.PowerSample, at time.Time) {
	r.mu.Lock()
	r.series[g] = append(r.series[g], stamped{at, s})
	r.mu.Unlock()
}

// Result aligns the samples to ld's rungs (T in seconds since ld.StartedAt; the first sample when
// the load has no start), summarises each rung, bounds each series to results.TelemetryMaxSamples
// and adds what the counters grew by between before and after (XIDs after the first sample).
func (r *Recorder) Result(source string, interval time.Duration, ld *results.Load, before, after map[int]gpu.ErrorCounts) *results.Telemetry {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &results.Telemetry{Source: source, IntervalSeconds: interval.Seconds()}
	var epoch time.Time
	if ld != nil {
		epoch = ld.StartedAt
	}
	for _, g := range r.gpus {
		if epoch.IsZero() && len(r.series[g]) > 0 {
			epoch = r.series[g][0].at
		}
	}
	for _, g := range r.gpus {
		raw := r.series[g]
		gt := results.GPUTelemetry{GPU: g}
		samples := make([]results.PowerSample, len(raw))
		for i, x := range raw {
			samples[i] = x.s
			samples[i].T = round2(x.at.Sub(epoch).Seconds())
		}
		if ld != nil {
			for k, run := range ld.Runs {
				gt.Rungs = append(gt.Rungs, rungTelemetry(k, run, samples))
			}
		}
		gt.Samples, gt.Stride = bound(samples, results.TelemetryMaxSamples)
		var start time.Time
		if len(raw) > 0 {
			start = raw[0].at
		}
		counterDeltas(&gt, before[g], after[g], start)
		t.GPUs = append(t.GPUs, gt)
	}
	if len(t.GPUs) == 0 {
		t.Note = "no GPU sampled"
	}
	return t
}

// RungLabel names a rung: "synchronous", "throughput c=16", "constant 12.5 req/s".
func RungLabel(run results.Run) string {
	switch {
	case run.TargetRate > 0:
		return fmt.Sprintf("%s %.3g req/s", run.Kind, run.TargetRate)
	case run.Concurrency > 0 && run.Kind != "synchronous":
		return fmt.Sprintf("%s c=%d", run.Kind, run.Concurrency)
	}
	return run.Kind
}

// rungTelemetry summarises the samples inside run's measured window.
func rungTelemetry(k int, run results.Run, samples []results.PowerSample) results.RungTelemetry {
	rt := results.RungTelemetry{Rung: k, Label: RungLabel(run), StartS: round2(run.WindowStartS), EndS: round2(run.WindowStartS + run.WindowSeconds)}
	var sm, mem, util, power float64
	var memN int
	reasons := map[uint64]int{}
	for _, s := range samples {
		if s.T < rt.StartS || s.T > rt.EndS {
			continue
		}
		rt.Samples++
		sm += float64(s.SMClockMHz)
		if s.SMClockMHz > 0 && (rt.SMClockMinMHz == 0 || s.SMClockMHz < rt.SMClockMinMHz) {
			rt.SMClockMinMHz = s.SMClockMHz
		}
		if s.MemClockMHz > 0 {
			mem += float64(s.MemClockMHz)
			memN++
		}
		util += float64(s.UtilPct)
		power += s.PowerW
		rt.PowerMaxW = max(rt.PowerMaxW, s.PowerW)
		rt.TempMaxC = max(rt.TempMaxC, s.TempC)
		rt.MemUsedMaxMiB = max(rt.MemUsedMaxMiB, s.MemUsedMiB)
		for bit := uint64(1); bit != 0 && bit <= s.ClockReasons; bit <<= 1 {
			if s.ClockReasons&bit != 0 {
				reasons[bit]++
			}
		}
	}
	if rt.Samples == 0 {
		return rt
	}
	n := float64(rt.Samples)
	rt.SMClockMeanMHz, rt.UtilMeanPct, rt.PowerMeanW = int(sm/n+0.5), int(util/n+0.5), round2(power/n)
	if memN > 0 {
		rt.MemClockMeanMHz = int(mem/float64(memN) + 0.5)
	}
	for bit, c := range reasons {
		if rt.ReasonShare == nil {
			rt.ReasonShare = map[string]float64{}
		}
		rt.ReasonShare[gpu.ReasonNames(bit)[0]] = round2(float64(c) / n)
	}
	return rt
}

// bound keeps at most limit samples: every stride-th, stride doubling until they fit.
func bound(s []results.PowerSample, limit int) ([]results.PowerSample, int) {
	stride := 1
	for len(s) > limit*stride {
		stride *= 2
	}
	if stride == 1 {
		return s, 0
	}
	out := make([]results.PowerSample, 0, len(s)/stride+1)
	for i := 0; i < len(s); i += stride {
		out = append(out, s[i])
	}
	return out, stride
}

// counterDeltas fills what grew between two readings, and the XIDs new since before (and not
// older than from, the first sample).
func counterDeltas(gt *results.GPUTelemetry, before, after gpu.ErrorCounts, from time.Time) {
	var reset []string
	delta := func(name string, a, b *int64) *int64 {
		if a == nil || b == nil {
			return nil
		}
		d := *b - *a
		if d < 0 {
			// The counter restarted (a GPU reset or a driver reload clears the volatile counts): it
			// grew by at least what it reads now.
			d = *b
			reset = append(reset, fmt.Sprintf("%s %d → %d", name, *a, *b))
		}
		return &d
	}
	gt.ECCCorrected = delta("corrected ECC", before.ECCCorrected, after.ECCCorrected)
	gt.ECCUncorrected = delta("uncorrected ECC", before.ECCUncorrected, after.ECCUncorrected)
	gt.PCIeReplays = delta("PCIe replays", before.PCIeReplays, after.PCIeReplays)
	seen := map[results.XIDEvent]bool{}
	for _, x := range before.XIDs {
		seen[x] = true
	}
	for _, x := range after.XIDs {
		if !seen[x] && !x.Time.Before(from) {
			gt.XIDs = append(gt.XIDs, x)
		}
	}
	sort.Slice(gt.XIDs, func(i, j int) bool { return gt.XIDs[i].Time.Before(gt.XIDs[j].Time) })
	gt.CountersNote = cmp.Or(after.Note, before.Note)
	if len(reset) > 0 {
		gt.CountersNote = results.JoinErr(gt.CountersNote, "counters went back during the load ("+strings.Join(reset, ", ")+
			"): the GPU was reset or its driver reloaded; the growth shown is what they read after it, at least")
	}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// ReadCounts reads the error counters of gpus where src can (a gpu.Counter); nil otherwise.
func ReadCounts(src any, gpus []int) map[int]gpu.ErrorCounts {
	c, ok := src.(gpu.Counter)
	if !ok {
		return nil
	}
	out := map[int]gpu.ErrorCounts{}
	for _, g := range gpus {
		n, err := c.Counts(g)
		if err != nil {
			n.Note = err.Error()
		}
		out[g] = n
	}
	return out
}
