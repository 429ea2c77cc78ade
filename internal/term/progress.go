package term

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress tracks a run of units (GPUs) made of steps (load rungs) and says where it is: "gpu 2/4",
// "rung 3/6", the elapsed time and an estimate of the time left. On a terminal it is one live line
// (a progress bar over all steps); otherwise every event is a plain line.
type Progress struct {
	mu     sync.Mutex
	w      io.Writer
	start  time.Time
	now    func() time.Time
	units  int                  // GPUs (endpoints) in the run
	steps  int                  // rungs per unit
	done   int                  // units finished
	active map[string]int       // unit -> rung it is on (1-based)
	since  map[string]time.Time // unit -> when it began its current rung
	rung   time.Duration        // a rung's planned length (0: unknown; the pace so far estimates then)
	plans  map[string]plan      // unit -> what its load planned as its current rung began
	order  []string             // active units in start order
	took   []time.Duration      // how long each planned unit took, once done
	bar    *progressbar.ProgressBar
}

// plan is what a unit's load said was left as a rung began: the rungs after it, and their planned time.
type plan struct {
	after int
	left  time.Duration
	at    time.Time
	began time.Time // when the unit began
}

// NewProgress starts tracking units × steps. live draws a live line (pass IsTerminal(w)).
func NewProgress(w io.Writer, units, steps int, live bool) *Progress {
	p := &Progress{w: w, start: time.Now(), now: time.Now, units: max(units, 1), steps: max(steps, 1), active: map[string]int{}, since: map[string]time.Time{}, plans: map[string]plan{}}
	if live {
		p.bar = progressbar.NewOptions(p.units*p.steps, progressbar.OptionSetWriter(w),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(20), progressbar.OptionSetPredictTime(false), progressbar.OptionShowElapsedTimeOnFinish())
	}
	return p
}

// Logf prints a line (above the live line on a terminal), with the elapsed time.
func (p *Progress) Logf(format string, args ...any) {
	p.locked(func() {
		line := fmt.Sprintf("[%6.1fs] %s", p.now().Sub(p.start).Seconds(), fmt.Sprintf(format, args...))
		if p.bar != nil {
			p.bar.Clear()
			fmt.Fprintln(p.w, line)
			p.redraw()
			return
		}
		fmt.Fprintln(p.w, line)
	})
}

// Step says unit is on step i (1-based) of its steps, doing what.
func (p *Progress) Step(unit string, i int, what string) {
	p.locked(func() {
		if _, ok := p.active[unit]; !ok {
			p.order = append(p.order, unit)
		}
		if i > p.steps { // the plan grew (the knee search probes more): never print "rung 13/12"
			p.steps = i
			if p.bar != nil {
				p.bar.ChangeMax(p.units * p.steps)
			}
		}
		p.active[unit] = i
		p.since[unit] = p.now()
		if p.bar != nil {
			p.redraw()
			return
		}
		fmt.Fprintf(p.w, "[%6.1fs] %s: rung %d/%d %s · %s\n", p.now().Sub(p.start).Seconds(), unit, i, p.stepsOf(unit), what, p.status())
	})
}

// Plan says what unit's load planned as its current rung began: after more rungs, taking left in
// all. The time left is then that less the time since (a plan that drops rungs shortens the count
// too), not the rungs left at SetRungTime's length. Call it before Step.
func (p *Progress) Plan(unit string, after int, left time.Duration) {
	p.locked(func() {
		began := p.now()
		if old, ok := p.plans[unit]; ok {
			began = old.began
		}
		p.plans[unit] = plan{after: after, left: left, at: p.now(), began: began}
	})
}

// stepsOf is how many rungs unit is planned to run: by its load's plan when there is one.
func (p *Progress) stepsOf(unit string) int {
	if pl, ok := p.plans[unit]; ok {
		if _, on := p.active[unit]; on {
			return p.active[unit] + pl.after
		}
	}
	return p.steps
}

// Done says a unit finished (whatever its outcome).
func (p *Progress) Done(unit string) {
	p.locked(func() {
		if _, ok := p.active[unit]; ok {
			delete(p.active, unit)
			delete(p.since, unit)
			if pl, ok := p.plans[unit]; ok {
				p.took = append(p.took, p.now().Sub(pl.began))
				delete(p.plans, unit)
			}
			p.order = slices.DeleteFunc(p.order, func(u string) bool { return u == unit })
		}
		p.done++
		if p.bar != nil {
			p.redraw()
		}
	})
}

// SetPlan sets the number of units and steps per unit once they are known (a nil Progress is
// silent: every method is a no-op on it).
func (p *Progress) SetPlan(units, steps int) {
	p.locked(func() {
		p.units, p.steps = max(units, 1), max(steps, 1)
		if p.bar != nil {
			p.bar.ChangeMax(p.units * p.steps)
		}
	})
}

// SetRungTime gives a rung's planned length (max_duration and drain): the time left is then the
// rungs left at it, not the pace so far, which a long first (synchronous) rung inflates.
func (p *Progress) SetRungTime(d time.Duration) { p.locked(func() { p.rung = d }) }

// Finish clears the live line.
func (p *Progress) Finish() {
	p.locked(func() {
		if p.bar != nil {
			p.bar.Clear()
		}
	})
}

// locked runs f with p locked; a nil Progress is silent (f does not run).
func (p *Progress) locked(f func()) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Writer returns a writer that turns another phase's output into progress lines: one line each,
// repeats dropped, and lines drop says the progress tells already left out.
func (p *Progress) Writer(drop func(line string) bool) io.Writer {
	return &lineWriter{p: p, drop: drop, seen: map[string]bool{}}
}

type lineWriter struct {
	mu   sync.Mutex
	p    *Progress
	drop func(string) bool
	buf  []byte
	seen map[string]bool
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if line == "" || w.seen[line] || (w.drop != nil && w.drop(line)) {
			continue
		}
		w.seen[line] = true
		w.p.Logf("%s", line)
	}
}

// Status is the current state in words, e.g. "gpu 2/4, 12 s elapsed, ~20 s left".
func (p *Progress) Status() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status()
}

func (p *Progress) redraw() {
	p.bar.Describe(p.describe())
	_ = p.bar.Set(p.stepsDone())
}

func (p *Progress) describe() string {
	var on []string
	for _, u := range p.order {
		on = append(on, fmt.Sprintf("%s rung %d/%d", u, p.active[u], p.stepsOf(u)))
	}
	return strings.Join(append(on, p.status()), " · ")
}

func (p *Progress) stepsDone() int {
	n := p.done * p.steps
	for _, i := range p.active {
		n += i - 1
	}
	return n
}

func (p *Progress) status() string {
	el := p.now().Sub(p.start)
	s := fmt.Sprintf("%s elapsed", el.Round(time.Second))
	switch {
	case len(p.active) > 1: // GPUs loaded at once: which of them is "gpu 4/4" would say nothing
		s = fmt.Sprintf("%d of %d GPUs done, %d running, %s", p.done, p.units, len(p.active), s)
	case p.units > 1:
		s = fmt.Sprintf("gpu %d/%d, %s", min(p.done+len(p.active), p.units), p.units, s)
	}
	if left, ok := p.left(el); ok {
		s += fmt.Sprintf(", ~%s left", left.Round(time.Second))
	}
	return s
}

// unitTime is how long a unit not yet started should take: the mean of what the planned units took
// or plan to take (same engine and profile), else its rungs at SetRungTime's length.
func (p *Progress) unitTime() time.Duration {
	var sum time.Duration
	for _, d := range p.took {
		sum += d
	}
	n := len(p.took)
	for u, pl := range p.plans {
		if _, on := p.active[u]; on {
			sum, n = sum+pl.at.Sub(pl.began)+pl.left, n+1
		}
	}
	if n == 0 {
		return time.Duration(p.steps) * p.rung
	}
	return sum / time.Duration(n)
}

// left estimates the time left. With planned lengths: the active unit that ends last, then the units
// not started, as many at once as run now (so every line printed at one instant agrees, whichever
// GPU stepped). Without, from the pace so far; none before a step.
func (p *Progress) left(el time.Duration) (time.Duration, bool) {
	done := p.stepsDone()
	total := p.units * p.steps
	if done <= 0 && len(p.active) == 0 || el <= 0 {
		return 0, false
	}
	if p.rung > 0 || len(p.plans) > 0 {
		var last time.Duration
		for u, i := range p.active {
			rest := time.Duration(p.steps-i)*p.rung + max(0, p.rung-p.now().Sub(p.since[u]))
			if pl, ok := p.plans[u]; ok {
				rest = max(0, pl.left-p.now().Sub(pl.at))
			}
			last = max(last, rest)
		}
		queued := max(p.units-p.done-len(p.active), 0)
		at := max(len(p.active), 1)
		waves := (queued + at - 1) / at
		return last + time.Duration(waves)*p.unitTime(), true
	}
	if done <= 0 {
		return 0, false
	}
	return time.Duration(float64(el) * float64(total-done) / float64(done)), true
}
