package load

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Steady state (docs/load-client.md): a sweep's probes and constant rungs are measured where their
// in-flight count and output rate have levelled (plateau), until that flat part holds what their
// figures need, at least their planned length and at most load.max_rung_duration. A rung that never
// levels, or never turns over enough requests, is transient: a ramp's figures, deciding no gate.
const (
	// levelSlice is the sampling slice of the plateau test; minLevelSlice the least, for short rungs.
	levelSlice    = 250 * time.Millisecond
	minLevelSlice = 25 * time.Millisecond
	// levelMinSlices: the flat part must hold at least this many slices (three thirds of four).
	levelMinSlices = 12
	// levelDrift is the largest relative gap between each third of the flat part and its mean;
	// levelInFlightSlack the least allowed on the in-flight count (two or three move by one).
	levelDrift         = 0.05
	levelInFlightSlack = 0.5
	// levelCI is the relative half-width of the flat part's mean output rate's 95 % interval.
	levelCI = 0.05
	// levelMinDone is the fewest requests that must complete inside the flat part: a level with
	// nothing completing is a slow ramp, or a queue that only grows.
	levelMinDone = 10
)

// plateau returns the earliest slice from which the output rate and the in-flight count are flat (flat;
// the rest at least a third of what was sampled), or -1 with what still moves. Thirds, not halves: a
// ramp at the start of a long tail pulls its first third three times as far. Failing that, queue
// reports the earliest slice from which the rate alone is flat while the in-flight count grows: an
// open loop past the engine's capacity.
func plateau(rate, infl []float64, slice time.Duration) (on int, queue bool, why string) {
	n := len(rate)
	if n < levelMinSlices {
		return -1, false, fmt.Sprintf("only %v sampled", time.Duration(n)*slice)
	}
	pr, pi := prefix(rate), prefix(infl)
	// A third of the rung: the last seconds of a count that grows slowly look flat on their own.
	last := n - max(levelMinSlices, n/3)
	for i := 0; i <= last; i++ {
		if flat(pr, i, n, levelDrift, 0) && flat(pi, i, n, levelDrift, levelInFlightSlack) {
			return i, false, ""
		}
	}
	for i := 0; i <= last; i++ {
		// The in-flight count grows through all three thirds, by more than the tolerance.
		t := (n - i) / 3
		a, b, c := mean(pi, i, i+t), mean(pi, i+t, n-t), mean(pi, n-t, n)
		if flat(pr, i, n, levelDrift, 0) && a < b && b < c && c > a+max(levelDrift*c, levelInFlightSlack) {
			return i, true, ""
		}
	}
	// What moves, over the last half: its first third against its last.
	h := n / 2
	t := (n - h) / 3
	return -1, false, fmt.Sprintf("over the last %v the in-flight count went %.1f → %.1f and the output rate %.0f → %.0f chunks/s",
		time.Duration(n-h)*slice, mean(pi, h, h+t), mean(pi, n-t, n), mean(pr, h, h+t)/slice.Seconds(), mean(pr, n-t, n)/slice.Seconds())
}

// prefix is the running sum of s, with a leading 0.
func prefix(s []float64) []float64 {
	p := make([]float64, len(s)+1)
	for i, v := range s {
		p[i+1] = p[i] + v
	}
	return p
}

// mean is the mean of s[a:b] from its running sums p (prefix).
func mean(p []float64, a, b int) float64 { return (p[b] - p[a]) / float64(b-a) }

// flat reports whether each third of [a, b), and its first levelMinSlices, have a mean within
// max(drift × the whole's mean, slack) of it (a mean of 0 is not flat). The first slices too: over a
// long flat tail, thirds alone would let the onset slide back into the ramp.
func flat(p []float64, a, b int, drift, slack float64) bool {
	m := mean(p, a, b)
	if m <= 0 {
		return false
	}
	t := (b - a) / 3
	for _, c := range [4][2]int{{a, a + t}, {a + t, b - t}, {b - t, b}, {a, a + levelMinSlices}} {
		if math.Abs(mean(p, c[0], c[1])-m) > max(drift*m, slack) {
			return false
		}
	}
	return true
}

// levelBatch is how many slices make one batch of the rate's interval: a closed loop's rate swings
// with its waves, and per-slice rates are not independent.
const levelBatch = 4

// rateCI is the mean per-slice rate of s and its 95 % interval's relative half-width (batch means).
func rateCI(s []float64) (float64, float64) {
	s = s[len(s)%levelBatch:]
	b := make([]float64, len(s)/levelBatch)
	for i := range b {
		for _, v := range s[i*levelBatch : (i+1)*levelBatch] {
			b[i] += v / levelBatch
		}
	}
	return meanCI(b)
}

// meanCI is the mean of s and the relative half-width of its normal 95 % interval.
func meanCI(s []float64) (float64, float64) {
	n := float64(len(s))
	var sum, ss float64
	for _, v := range s {
		sum += v
	}
	m := sum / n
	if m <= 0 || n < 2 {
		return m, math.Inf(1)
	}
	for _, v := range s {
		ss += (v - m) * (v - m)
	}
	return m, 1.96 * math.Sqrt(ss/(n-1)) / math.Sqrt(n) / m
}

// levelOut is what a steady rung's watcher found.
type levelOut struct {
	mu     sync.Mutex
	onset  time.Duration // when the flat part began, from the rung's start; -1: never
	done   bool          // the flat part held what the figures need: the rung stopped on it
	queue  bool          // past capacity: the output rate flat, the in-flight count growing
	reason string        // how it levelled, or what was missing when the watcher last looked
}

func (l *levelOut) set(onset time.Duration, done, queue bool, why string) {
	l.mu.Lock()
	l.onset, l.done, l.queue, l.reason = onset, done, queue, why
	l.mu.Unlock()
}

func (l *levelOut) get() (onset time.Duration, done, queue bool, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.onset, l.done, l.queue, l.reason
}

// sliceFor is the plateau test's slice for rungs of d: levelSlice, or a sixteenth of a short rung.
func sliceFor(d time.Duration) time.Duration {
	return min(levelSlice, max(minLevelSlice, d/16))
}

// levelWatch samples a steady rung about every slice until ctx ends: chunks streamed (marked, as a
// rate over the sample's real length: a busy client's ticker skips beats), requests in flight and
// completions since a time (doneSince; since is the rung's clock). Past planned, once the flat part
// holds levelMinDone completions and its rate is known within levelCI (or is a queue's: more time
// only lengthens it), it records the onset and calls stop.
func levelWatch(ctx context.Context, stop func(), slice, planned time.Duration, marked, inflight func() int64,
	since func() time.Duration, doneSince func(time.Duration) int, lo *levelOut) {
	t := time.NewTicker(slice)
	defer t.Stop()
	var rate, infl []float64
	var at []time.Duration // each sample's start, from the rung's start
	last, lastAt := marked(), since()
	lo.set(-1, false, false, "no sample yet")
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, nowAt := marked(), since()
		if nowAt <= lastAt {
			continue
		}
		// Per slice, so that the thirds' means weigh as the plateau test assumes.
		rate = append(rate, float64(now-last)*float64(slice)/float64(nowAt-lastAt))
		infl = append(infl, float64(inflight()))
		at = append(at, lastAt)
		last, lastAt = now, nowAt
		on, queue, why := plateau(rate, infl, slice)
		if on < 0 {
			lo.set(-1, false, false, "never levelled: "+why)
			continue
		}
		onset := at[on]
		done := doneSince(onset)
		m, ci := rateCI(rate[on:])
		state := "levelled"
		if queue {
			state = fmt.Sprintf("queueing (the output rate flat while the in-flight count still grows, to %.0f: past capacity)", infl[len(infl)-1])
		}
		switch {
		case done < levelMinDone:
			lo.set(onset, false, queue, fmt.Sprintf("%s after %v, but only %d of the %d requests its figures need completed after that", state, onset.Round(time.Millisecond), done, levelMinDone))
		case nowAt < planned:
			lo.set(onset, false, queue, fmt.Sprintf("%s after %v; planned for %v", state, onset.Round(time.Millisecond), planned.Round(time.Millisecond)))
		case ci > levelCI && !queue && nowAt < 2*planned:
			// Up to twice its plan to narrow; not transient for this (its interval is reported).
			lo.set(onset, true, queue, fmt.Sprintf("%s after %v, %d requests completed after it; its output rate is known only within ±%.0f%% (not ±%.0f%%)", state, onset.Round(time.Millisecond), done, 100*ci, 100*levelCI))
		default:
			lo.set(onset, true, queue, fmt.Sprintf("%s after %v (output rate flat within %.0f%%); %d requests completed and %.0f chunks/s known within ±%.1f%% in the %v after it",
				state, onset.Round(time.Millisecond), 100*levelDrift, done, m/slice.Seconds(), 100*ci, (nowAt-onset).Round(time.Millisecond)))
			stop()
			return
		}
	}
}
