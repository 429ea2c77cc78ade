package sim

import (
	"cmp"
	"math/rand/v2"
	"sync"
	"time"
)

// A driver turns admitted requests into tokens over wall time: it bumps Seq.Generated, sets
// Seq.Done with the last token, and pokes Seq.Notify. The HTTP handler only writes what it finds.
type driver interface {
	add(s *Seq)
	abort(s *Seq)
	stats() (running, waiting int, kv float64)
	close()
}

func notify(s *Seq) { poke(s.Notify) }

// poke wakes c's reader unless a wake-up is already waiting (c has capacity 1).
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
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
	// due is when the request that woke the idle engine was due in its queue: the first step starts
	// then, not when the loop goroutine got to run (a loaded machine wakes it late).
	due time.Time
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

// add hands s to the engine after the frontend's entry cost (Perf.Entry), as RunVirtual does.
func (r *realtime) add(s *Seq) {
	from := s.Received
	if from.IsZero() {
		from = time.Now()
	}
	due := from.Add(r.eng.Perf().Entry(s.Prompt, s.Chat))
	if wait := time.Until(due); wait > 0 {
		time.AfterFunc(wait, func() { r.enqueue(s, due) })
		return
	}
	r.enqueue(s, due)
}

func (r *realtime) enqueue(s *Seq, due time.Time) {
	r.mu.Lock()
	if r.eng.Idle() && (r.due.IsZero() || due.Before(r.due)) {
		r.due = due
	}
	r.eng.Add(s)
	r.mu.Unlock()
	poke(r.wake)
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
				r.mu.Lock()
				next, r.due = r.due, time.Time{}
				r.mu.Unlock()
				if now := time.Now(); next.IsZero() || next.Before(now.Add(-50*time.Millisecond)) {
					next = now
				}
				continue
			case <-r.quit:
				return
			}
		}
		d, emitted, _ := r.eng.Step()
		d = cmp.Or(d, time.Millisecond) // 0: nothing could be scheduled (cannot happen with a valid Perf): never spin
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
		// The step's tokens reach their handlers Perf.Exit after the step's scheduled end.
		due := next.Add(r.eng.Perf().Exit())
		if wait := time.Until(due); wait > 0 {
			batch := append([]delivery(nil), out...)
			time.AfterFunc(wait, func() { deliver(batch, due.UnixNano()) })
		} else {
			deliver(out, due.UnixNano())
		}
	}
}

// deliver hands a step's tokens to their handlers; dueNs is when they were due (for the lag).
func deliver(out []delivery, dueNs int64) {
	for _, o := range out {
		o.s.Due.CompareAndSwap(0, dueNs)
		// Never move backwards: two steps' deliveries may run in either order.
		for cur := o.s.Generated.Load(); int(cur) < o.gen && !o.s.Generated.CompareAndSwap(cur, int32(o.gen)); cur = o.s.Generated.Load() {
		}
		if o.done {
			o.s.Done.Store(true)
		}
		notify(o.s)
	}
}

// fixed produces tokens on a fixed schedule: token k is due at arrival + TTFT + (k−1)·ITL (each gap
// scaled by 1 ± jitter). One goroutine and a 1 ms ticker serve every stream through a timing wheel
// of 1 ms slots (never early, at most a tick late): 2,000 streams cost a thousand wake-ups a second,
// not one timer per token.
type fixed struct {
	ttft, itl time.Duration
	jitter    float64
	seed      int64 // with the request's ID, seeds its jitter
	mu        sync.Mutex
	slots     [][]*due // ring of wheelSlots 1 ms slots, indexed by absolute ms & wheelMask
	far       []*due   // due beyond the ring's horizon (long TTFT or ITL)
	cursor    int64    // next absolute ms slot to release
	live      int
	wake      chan struct{}
	quit      chan struct{}
	done      chan struct{}
}

type due struct {
	at  time.Time
	s   *Seq
	rng *rand.Rand
}

const (
	wheelSlots = 1 << 12 // 4.096 s of 1 ms slots
	wheelMask  = wheelSlots - 1
	tick       = time.Millisecond
)

func newFixed(ttft, itl time.Duration, jitter float64, seed int64) *fixed {
	f := &fixed{ttft: ttft, itl: itl, jitter: jitter, seed: seed, slots: make([][]*due, wheelSlots), wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		cursor: slotOf(time.Now())}
	go f.loop()
	return f
}

// slotOf is the absolute ms slot a due time belongs to, rounded up so no token leaves early.
func slotOf(t time.Time) int64 { return (t.UnixNano() + int64(tick) - 1) / int64(tick) }

// place files d in its slot, or in far when beyond the horizon. Callers hold mu.
func (f *fixed) place(d *due) {
	slot := max(slotOf(d.at), f.cursor)
	if slot-f.cursor >= wheelSlots {
		f.far = append(f.far, d)
		return
	}
	f.slots[slot&wheelMask] = append(f.slots[slot&wheelMask], d)
}

func (f *fixed) add(s *Seq) {
	var rng *rand.Rand
	if f.jitter > 0 {
		rng = rand.New(rand.NewPCG(uint64(f.seed)^0x5bd1e995, s.ID))
	}
	d := &due{at: time.Now().Add(jittered(f.ttft, f.jitter, rng)), s: s, rng: rng}
	f.mu.Lock()
	if f.live == 0 {
		f.cursor = slotOf(time.Now()) // the wheel was idle: its cursor is stale
	}
	f.place(d)
	f.live++
	f.mu.Unlock()
	poke(f.wake)
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
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		f.mu.Lock()
		idle := f.live == 0
		if idle {
			f.cursor = slotOf(time.Now())
		}
		f.mu.Unlock()
		if idle {
			ticker.Stop()
			select {
			case <-f.wake:
				ticker.Reset(tick)
			case <-f.quit:
				return
			}
		}
		f.release(time.Now())
		select {
		case <-ticker.C:
		case <-f.wake:
		case <-f.quit:
			return
		}
	}
}

// release hands out every token due by now.
func (f *fixed) release(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := now.UnixNano() / int64(tick)
	for ; f.cursor <= last; f.cursor++ {
		if f.cursor&wheelMask == 0 && len(f.far) > 0 {
			f.refill() // once per revolution, bring far entries into the ring
		}
		k := f.cursor & wheelMask
		// Index loop: an entry whose next token is due in this same slot is appended and released now.
		for i := 0; i < len(f.slots[k]); i++ {
			d := f.slots[k][i]
			s := d.s
			if s.gone.Load() {
				f.live--
				continue
			}
			s.Due.CompareAndSwap(0, d.at.UnixNano())
			g := s.Generated.Add(1)
			if int(g) >= s.MaxOut {
				s.Done.Store(true) // before the notification: the handler may look at once
				notify(s)
				f.live--
				continue
			}
			notify(s)
			// Next token from the previous due time, not from now: no drift.
			d.at = d.at.Add(jittered(f.itl, f.jitter, d.rng))
			f.place(d)
		}
		clear(f.slots[k])
		f.slots[k] = f.slots[k][:0]
	}
}

// refill moves far entries that are now within the ring's horizon into it.
func (f *fixed) refill() {
	far := f.far
	f.far = nil
	for _, d := range far {
		f.place(d) // back into far when still beyond the horizon
	}
}
