package pipeline

import (
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// timed runs one phase of the run and records its wall time in the summary (its time-to-vet), so
// a run killed later keeps the phases it finished.
func (r *run) timed(phase string, fn func()) {
	start := time.Now()
	fn()
	d := time.Since(start).Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.sum.Timing
	t.Phases = append(t.Phases, results.PhaseTime{Phase: phase, Seconds: d, Schedule: r.schedule(phase)})
	t.TotalSeconds = time.Since(r.sum.StartedAt).Seconds()
}

// schedule says how a phase ran across the GPUs ("" when it does not run per GPU). Called with r.mu held.
func (r *run) schedule(phase string) string {
	switch phase {
	case "health":
		if h := r.host().Health; h != nil && len(h.GPUs) > 0 {
			if h.Parallel {
				return fmt.Sprintf("%d GPUs at once (steps in health.timing)", len(h.GPUs))
			}
			return "one GPU at a time"
		}
	case "models":
		if c := r.sum.Meta.Parallel; c != nil && c.Slots > 0 {
			switch {
			case c.Slots == 1:
				return fmt.Sprintf("1 engine (%s)", c.Mode)
			case c.GPUs >= c.Slots:
				return fmt.Sprintf("%d engines at once (%s)", c.Slots, c.Mode)
			}
			return fmt.Sprintf("%d of %d engines at once (%s)", c.GPUs, c.Slots, c.Mode)
		}
	}
	return ""
}

// stopwatch records the phases of one endpoint.
type stopwatch struct {
	start, mark time.Time
	t           results.EndpointTiming
}

func newStopwatch() *stopwatch { n := time.Now(); return &stopwatch{start: n, mark: n} }

// lap adds the time since the last lap to *field.
func (s *stopwatch) lap(field *float64) {
	n := time.Now()
	*field += n.Sub(s.mark).Seconds()
	s.mark = n
}

func (s *stopwatch) result() *results.EndpointTiming {
	t := s.t
	t.TotalSeconds = time.Since(s.start).Seconds()
	return &t
}
