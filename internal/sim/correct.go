package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/gpu"
)

// Faults of correctness, for end-to-end tests: a corrupt GPU (FleetConfig.Corrupt) computes wrong
// answers (its GEMMs' results and its engine's greedy outputs differ); a throttled GPU
// (FleetConfig.Throttle) slows down with a clock-event reason, as one with a failing fan does.

// CorruptFrom is how long into a burn a corrupt GPU's results start to differ, and CorruptEvery
// how often they do then (one result in CorruptEvery).
const (
	CorruptFrom  = time.Second
	CorruptEvery = 50
)

// CorruptDrift is the output position (counted from 0) from which a corrupt GPU's greedy tokens
// differ from a healthy one's.
const CorruptDrift = 5

// ThrottleSpeed is a throttled GPU's speed while its throttle is on (HW slowdown halves the
// clocks on real cards; 0.6 keeps the sim's engine in its sweep).
const ThrottleSpeed = 0.6

// throttleReasons are the reasons a throttle may give, by name (gpu.ReasonNames' spelling).
var throttleReasons = map[string]uint64{
	"hw_slowdown": 0x8, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80,
}

// parseCorrupt reads "GPU" ("" is none).
func parseCorrupt(s string, count int) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= count {
		return 0, fmt.Errorf("corrupt %q: want the index of a GPU 0–%d, or \"\" for none", s, count-1)
	}
	return n, nil
}

// Corrupt says whether GPU i computes wrong answers.
func (f *Fleet) Corrupt(i int) bool { return f.corrupt >= 0 && i == f.corrupt }

// Mismatch says whether result n (from 1) of a GEMM benchmark on GPU i, since into it, differs
// from the first result: on a corrupt GPU, one burn result in CorruptEvery from CorruptFrom on, and
// its BF16 GEMM microbenchmark (the tensor-core path the burn runs); never on a healthy one.
func (f *Fleet) Mismatch(i int, bench string, n int64, since time.Duration) bool {
	return f.Corrupt(i) && (bench == "gemm_bf16" || bench == "burn" && since >= CorruptFrom && n%CorruptEvery == 0)
}

// throttle is a parsed Throttle; gpu -1: none.
type throttle struct {
	gpu    int
	reason uint64
	window
}

// parseThrottle reads "GPU[:REASON[:FROM[-TO]]]", e.g. "2", "2:hw_power_brake_slowdown",
// "2:hw_slowdown:10s-30s"; "" is none. REASON defaults to hw_slowdown.
func parseThrottle(s string, count int) (throttle, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return throttle{gpu: -1}, nil
	}
	bad := func(why string) (throttle, error) {
		return throttle{}, fmt.Errorf("throttle %q: %s; want GPU[:REASON[:FROM[-TO]]] with GPU 0–%d, REASON one of %s, and Go durations, e.g. 2 or 2:hw_slowdown:10s-30s",
			s, why, count-1, strings.Join(slices.Sorted(maps.Keys(throttleReasons)), ", "))
	}
	parts := strings.SplitN(s, ":", 3)
	n, err := strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil || n < 0 || n >= count {
		return bad("no such GPU")
	}
	t := throttle{gpu: n, reason: throttleReasons["hw_slowdown"]}
	if len(parts) > 1 && strings.TrimSpace(parts[1]) != "" {
		var ok bool
		if t.reason, ok = throttleReasons[strings.TrimSpace(parts[1])]; !ok {
			return bad("unknown reason")
		}
	}
	if len(parts) > 2 {
		var why string
		if t.window, why = parseWindow(parts[2]); why != "" {
			return bad(why)
		}
	}
	return t, nil
}

// throttleOn says whether GPU i is throttled now, and with which reason bit.
func (f *Fleet) throttleOn(i int, now time.Time) (uint64, bool) {
	if f.throttle.gpu == i && f.throttle.on(f, now) {
		return f.throttle.reason, true
	}
	return 0, false
}

// simMemClockMHz is a virtual GPU's memory clock (an H200's HBM3e reads 3201 MHz in nvidia-smi).
const simMemClockMHz = 3201

// Counts reads GPU i's error counters: a virtual GPU has no ECC errors, PCIe replays or XIDs.
func (f *Fleet) Counts(i int) (gpu.ErrorCounts, error) {
	if err := f.check(i); err != nil {
		return gpu.ErrorCounts{}, err
	}
	return gpu.ErrorCounts{ECCCorrected: new(int64(0)), ECCUncorrected: new(int64(0)), PCIeReplays: new(int64(0))}, nil
}

// ThrottleSpeed is GPU i's speed under its throttle now: ThrottleSpeed while it is on, else 1.
// Engines read it at every step (Perf.Slowdown), so a throttle that starts mid-run slows the rungs
// after it.
func (f *Fleet) ThrottleSpeed(i int) float64 {
	if _, on := f.throttleOn(i, time.Now()); on {
		return ThrottleSpeed
	}
	return 1
}
