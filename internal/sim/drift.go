package sim

import (
	"math/rand/v2"
	"time"
)

// Engine drift: a serving engine whose speed wanders over minutes while its GPU stays the same, as a
// CPU-bound engine's does with its host's state, so its figures differ from run to run by more than
// one run's requests spread. Every engine of a fleet shares it, so only figures measured at
// different times see it, never GPU-to-GPU comparisons of engines loaded together.

// driftPeriod is how long the drift holds a level before moving to the next (linearly).
const driftPeriod = 5 * time.Second

// drift is a speed factor in [1 − pct/100, 1] that moves between random levels every driftPeriod.
// Its levels are drawn from the wall clock, not from sim.seed: two runs of one plan see different
// drifts, as two runs of one real engine do.
type drift struct {
	pct    float64
	start  time.Time
	levels []float64 // level i holds at start + i × driftPeriod
	rng    *rand.Rand
}

func newDrift(pct float64, start time.Time) *drift {
	if pct <= 0 {
		return nil
	}
	n := uint64(time.Now().UnixNano())
	return &drift{pct: pct, start: start, rng: rand.New(rand.NewPCG(n, n>>17|1))}
}

// speed is the factor at t (the caller holds the fleet's lock).
func (d *drift) speed(t time.Time) float64 {
	if d == nil {
		return 1
	}
	x := max(t.Sub(d.start), 0).Seconds() / driftPeriod.Seconds()
	i := int(x)
	for len(d.levels) <= i+1 {
		d.levels = append(d.levels, d.rng.Float64())
	}
	f := x - float64(i)
	level := d.levels[i]*(1-f) + d.levels[i+1]*f
	return 1 - d.pct/100*level
}

// EngineDrift is the serving engines' speed factor now (1 without sim.engine_drift_pct): engines
// read it at every step, health's microbenchmarks never (the GPU does not drift).
func (f *Fleet) EngineDrift() float64 {
	if f.drift == nil { // set once, at NewFleet: an engine step takes no lock without a drift
		return 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drift.speed(time.Now())
}
