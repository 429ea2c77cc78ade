package sim

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"time"
)

// A driver turns admitted requests into tokens over wall time: it bumps Seq.Generated, sets
// Seq.Done with the last token, and pokes Seq.Notify. The HTTP handler only writes what it finds.
type driver interface {
	add(s *Seq, ttft, itl time.Duration, jitter float64, rng *rand.Rand)
	abort(s *Seq)
	stats() (running, waiting int, kv float64)
	close()
}

func notify(s *Seq) {
	select {
	case s.Notify <- struct{}{}:
	default:
	}
}

// realtime runs the Engine in wall time: plan a step, sleep its duration (one timer per step, not
// per token), then release that step's tokens together, as vLLM does at step boundaries.
type realtime struct {
	mu     sync.Mutex
	eng    *Engine
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}
	onStep func(busy time.Duration) // load accounting for a Fleet GPU
}

type delivery struct {
	s    *Seq
	gen  int
	done bool
}

func newRealtime(e *Engine, onStep func(time.Duration)) *realtime {
	r := &realtime{eng: e, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), onStep: onStep}
	go r.loop()
	return r
}

func (r *realtime) add(s *Seq, _, _ time.Duration, _ float64, _ *rand.Rand) {
	r.mu.Lock()
	r.eng.Add(s)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *realtime) abort(s *Seq) {
	r.mu.Lock()
	r.eng.Abort(s)
	r.mu.Unlock()
}

func (r *realtime) stats() (int, int, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng.Running(), r.eng.Waiting(), r.eng.KVUsage()
}

func (r *realtime) close() {
	close(r.quit)
	<-r.done
}

func (r *realtime) loop() {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	var out []delivery
	next := time.Now()
	for {
		r.mu.Lock()
		if r.eng.Idle() {
			r.mu.Unlock()
			select {
			case <-r.wake:
				next = time.Now()
				continue
			case <-r.quit:
				return
			}
		}
		d, emitted, _ := r.eng.Step()
		out = out[:0]
		for _, s := range emitted {
			out = append(out, delivery{s, s.generated, s.generated >= s.MaxOut})
		}
		r.mu.Unlock()
		// Steps run back to back on the engine's own schedule: a late wake-up does not stretch it.
		next = next.Add(d)
		if now := time.Now(); next.Before(now.Add(-50 * time.Millisecond)) {
			next = now // far behind (machine stalled): do not burst to catch up
		}
		timer.Reset(time.Until(next))
		select {
		case <-timer.C:
		case <-r.quit:
			return
		}
		if r.onStep != nil {
			r.onStep(d)
		}
		for _, o := range out {
			o.s.Generated.Store(int32(o.gen))
			if o.done {
				o.s.Done.Store(true)
			}
			notify(o.s)
		}
	}
}

// fixed produces tokens on a fixed schedule: token k of a request is due at
// arrival + TTFT + (k−1)·ITL (each gap scaled by 1 ± jitter), with no load effects. One goroutine and
// one timer serve every stream: it sleeps until the earliest due token and releases everything due
// within the next half millisecond, so 2,000 streams cost a few thousand wake-ups a second.
type fixed struct {
	mu   sync.Mutex
	h    dueHeap
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	live int
}

type due struct {
	at     time.Time
	s      *Seq
	itl    time.Duration
	jitter float64
	rng    *rand.Rand
}

type dueHeap []*due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(*due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

const batchWindow = 500 * time.Microsecond

func newFixed() *fixed {
	f := &fixed{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *fixed) add(s *Seq, ttft, itl time.Duration, jitter float64, rng *rand.Rand) {
	first := jittered(ttft, jitter, rng)
	f.mu.Lock()
	heap.Push(&f.h, &due{at: time.Now().Add(first), s: s, itl: itl, jitter: jitter, rng: rng})
	f.live++
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func jittered(d time.Duration, jitter float64, rng *rand.Rand) time.Duration {
	if jitter <= 0 || rng == nil {
		return d
	}
	return time.Duration(float64(d) * (1 + jitter*(2*rng.Float64()-1)))
}

func (f *fixed) abort(s *Seq) { s.gone.Store(true) }

func (f *fixed) stats() (int, int, float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live, 0, 0
}

func (f *fixed) close() {
	close(f.quit)
	<-f.done
}

func (f *fixed) loop() {
	defer close(f.done)
	timer := time.NewTimer(time.Hour)
	for {
		f.mu.Lock()
		if len(f.h) == 0 {
			f.mu.Unlock()
			select {
			case <-f.wake:
				continue
			case <-f.quit:
				return
			}
		}
		now := time.Now()
		horizon := now.Add(batchWindow)
		for len(f.h) > 0 && f.h[0].at.Before(horizon) {
			d := f.h[0]
			s := d.s
			if s.gone.Load() {
				heap.Pop(&f.h)
				f.live--
				continue
			}
			g := s.Generated.Add(1)
			if int(g) >= s.MaxOut {
				s.Done.Store(true)
				heap.Pop(&f.h)
				f.live--
			} else {
				// Next token is scheduled from the previous due time, not from now: no drift.
				d.at = d.at.Add(jittered(d.itl, d.jitter, d.rng))
				heap.Fix(&f.h, 0)
			}
			notify(s)
		}
		var wait time.Duration
		if len(f.h) > 0 {
			wait = time.Until(f.h[0].at)
		}
		f.mu.Unlock()
		if wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-f.wake:
			timer.Stop() // Go ≥ 1.23: no stale tick can be received after Stop
		case <-f.quit:
			return
		}
	}
}
