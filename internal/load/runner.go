package load

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/gpuvet/gpuvet/internal/dataset"
)

// Profile kinds of one rung.
const (
	kindSynchronous = "synchronous"
	kindConcurrency = "concurrency"
	kindThroughput  = "throughput"
	kindConstant    = "constant"
	kindPoisson     = "poisson"
	// kindTrace replays a trace: each request at the trace's arrival time (workload trace).
	kindTrace = "trace"
)

// rungSpec is one rung: a closed loop of Concurrency slots, or an open loop at Rate req/s.
type rungSpec struct {
	Index       int
	Kind        string
	Concurrency int     // closed loop (synchronous, concurrency, throughput)
	Rate        float64 // open loop (constant, poisson)
	Duration    time.Duration
	MaxRequests int // measured requests (warm-up not included); 0: bounded by Duration only
	WarmupReqs  int
	WarmupDur   time.Duration
	Drain       time.Duration // bound on the tail after dispatch stops
	MaxInFlight int           // open loop: requests beyond it wait (and the lag shows it)
	// Steady measures the rung in its steady state (levelWatch): at least Duration, until its level
	// holds what its figures need, at most Cap; its window opens at the level's onset.
	Steady bool
	Slice  time.Duration // the plateau test's sampling slice
	// MinSamples: past Duration, dispatch until that many measured completions, at most Cap (0: none).
	MinSamples int
	Cap        time.Duration
	// Expect is the rung's predicted length, tail included (0: none); Known: from a measured pace.
	Expect time.Duration
	Known  bool
	// Shorten lets a sized synchronous rung ask for shorter outputs when full ones would not fit (shortLen).
	Shorten bool
	// Block is the 1-based block of the sweep's synchronous rung (blocks.go); 0: a rung of its own.
	Block int
	// Arrive is when request k is sent, from the rung's start (a trace replay; nil: at Rate).
	Arrive func(k int) time.Duration
	// PromptTokens is every prompt's length (a context ladder's rung; 0: the source's own lengths).
	PromptTokens int
}

// sized reports whether the rung is sized by completions.
func (s rungSpec) sized() bool {
	return s.MinSamples > 0 && s.Cap > s.Duration && s.Duration > 0 && s.MaxRequests == 0 && !s.openLoop()
}

// steadied reports whether the rung is measured in its steady state, with room to grow.
func (s rungSpec) steadied() bool {
	return s.Steady && s.Cap >= s.Duration && s.Duration > 0 && s.MaxRequests == 0
}

// until is how long dispatch may go on: Duration, or Cap for a sized or steady rung.
func (s rungSpec) until() time.Duration {
	if s.sized() || s.steadied() {
		return s.Cap
	}
	return s.Duration
}

func (s rungSpec) openLoop() bool {
	return s.Kind == kindConstant || s.Kind == kindPoisson || s.Kind == kindTrace
}

func (s rungSpec) label() string {
	if s.Kind == kindTrace {
		return fmt.Sprintf("trace replay, %d requests (%.3g req/s on average)", s.MaxRequests, s.Rate)
	}
	if s.openLoop() {
		return fmt.Sprintf("%s %.3g req/s", s.Kind, s.Rate)
	}
	if s.Block > 0 {
		return fmt.Sprintf("%s c=%d, block %d of %d", s.Kind, s.Concurrency, s.Block, SyncBlocks)
	}
	return fmt.Sprintf("%s c=%d", s.Kind, s.Concurrency)
}

// rungOut is what one rung measured, before it is summarised.
type rungOut struct {
	spec             rungSpec
	recs             []*Record
	start            time.Duration
	winStart, winEnd time.Duration
	cpu              time.Duration // this process's CPU time over the rung
	wall             time.Duration
	interrupted      bool
	stoppedAt        time.Duration // when dispatch ended early (0: it did not)
	rampEnd          time.Duration // the window opens no earlier: a steady rung's onset, else start + mean E2E
	errStop          string        // why the rung's errors ended it ("": they did not)
	level            *levelOut     // a steady rung's plateau test (nil: not tested)
	// Sized rungs: measured completions at dispatch's end, enough or not, and the shorter output.
	completed   int
	enough      bool
	shortTokens int
	fullTokens  int // the profile's output length
}

// runner drives rungs; prompt indexes run on so no prefix cache flatters a later rung.
type runner struct {
	c         *client
	src       dataset.Source
	outTokens int
	seed      uint64
	next      atomic.Int64
	sessions  atomic.Int64 // multi-turn sessions started (conversation)
	progress  io.Writer
	modelsURL string // GET target used to open connections before closed-loop rungs ("": none)
}

// conversation picks a closed-loop slot's prompts: a multi-turn session's turns in order, else -1.
func (rn *runner) conversation() func() int {
	ss, ok := rn.src.(interface{ SessionTurns() int })
	if !ok || ss.SessionTurns() < 2 {
		return func() int { return -1 }
	}
	turns := ss.SessionTurns()
	session, next := 0, turns // next: the turn to send; turns: take a new session first
	return func() int {
		if next == turns {
			session, next = int(rn.sessions.Add(1)-1), 0
		}
		next++
		return session*turns + next - 1
	}
}

// run executes one rung; on ctx cancellation it stops at once, marked interrupted.
func (rn *runner) run(ctx context.Context, spec rungSpec) *rungOut {
	if !spec.openLoop() {
		rn.prewarm(ctx, spec.Concurrency) // before the clock starts
	}
	g := rn.begin(ctx, spec)
	defer g.release()
	out := g.out
	cpu0 := cpuTime()
	go g.drainAfterDispatch()
	var watch sync.WaitGroup // the early-stop watcher, when there is one
	if spec.steadied() {
		out.level = &levelOut{}
		watch.Go(g.watchLevel)
	}
	stopBar := rn.bar(spec, out.start, g.ended)
	var wg sync.WaitGroup
	if spec.openLoop() {
		g.openLoop(&wg)
	} else {
		for range spec.Concurrency {
			wg.Go(g.closedSlot)
		}
	}
	wg.Wait()
	g.stopDispatch()
	watch.Wait() // its stoppedAt and reason are read below
	if out.level != nil {
		if onset, done, _, _ := out.level.get(); done {
			out.fromOnset(out.start + onset)
		} else {
			out.skipRamp(g.meanE2E, spec.Duration) // transient: its figures are the ramp's, said so
		}
	}
	stopBar()
	end := rn.c.since()
	out.interrupted = ctx.Err() != nil
	if spec.sized() && !out.enough {
		g.enough() // the count at the cap (enough if the last requests reached it)
	}
	out.wall = end - out.start
	out.cpu = cpuTime() - cpu0
	out.window(spec, time.Duration(g.lastDispatch.Load()), end)
	rn.settle(ctx, out)
	return out
}

// rungState is one rung while it runs; mu guards out and the good/bad counts.
type rungState struct {
	rn   *runner
	spec rungSpec
	out  *rungOut
	mu   sync.Mutex
	// dispatchCtx ends dispatch (bound, early stop, Ctrl-C); reqCtx the requests (Ctrl-C, drain).
	dispatchCtx, reqCtx context.Context
	stopDispatch        context.CancelFunc
	cancelReqs          context.CancelCauseFunc
	endDeadline         context.CancelFunc
	inflight            atomic.Int64
	good, bad           int // ended requests, warm-up included: what the error stop weighs
	total               int // requests to send, warm-up included (0: bounded by time)
	counter             atomic.Int64
	lastDispatch        atomic.Int64
	lastSent            chan struct{} // closed when request total-1 is sent
	lastOnce            sync.Once
}

// begin starts the rung's clock and its contexts: dispatch ends at until().
func (rn *runner) begin(ctx context.Context, spec rungSpec) *rungState {
	g := &rungState{rn: rn, spec: spec, out: &rungOut{spec: spec, start: rn.c.since(), fullTokens: rn.outTokens},
		lastSent: make(chan struct{}), endDeadline: func() {}}
	g.reqCtx, g.cancelReqs = context.WithCancelCause(ctx)
	g.dispatchCtx, g.stopDispatch = context.WithCancel(ctx)
	if spec.Duration > 0 {
		g.dispatchCtx, g.endDeadline = context.WithDeadline(g.dispatchCtx, rn.c.epoch.Add(g.out.start+spec.until()))
	}
	if spec.MaxRequests > 0 {
		g.total = spec.MaxRequests + spec.WarmupReqs
	}
	return g
}

// release frees the rung's contexts, ending whatever is still in flight.
func (g *rungState) release() {
	g.endDeadline()
	g.stopDispatch()
	g.cancelReqs(nil)
}

// add takes an ended request back, and stops dispatch when the errors decide the rung (errorsDecide).
func (g *rungState) add(r *Record) {
	g.inflight.Add(-1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out.recs = append(g.out.recs, r)
	switch {
	case r.ok():
		g.good++
	case !r.Incomplete:
		g.bad++
	}
	if why := errorsDecide(g.good, g.bad, slotsOf(g.spec)); why != "" && g.out.errStop == "" && g.dispatchCtx.Err() == nil {
		g.out.errStop, g.out.stoppedAt = why, g.rn.c.since()
		g.stopDispatch()
	}
}

// dispatched counts request k as sent and in flight (until add takes it back).
func (g *rungState) dispatched(k int) {
	g.inflight.Add(1)
	g.lastDispatch.Store(int64(g.rn.c.since()))
	if g.total > 0 && k == g.total-1 {
		g.lastOnce.Do(func() { close(g.lastSent) })
	}
}

// drainAfterDispatch gives the tail spec.Drain to finish once dispatch is over, then cuts it.
func (g *rungState) drainAfterDispatch() {
	select {
	case <-g.dispatchCtx.Done():
	case <-g.lastSent:
	}
	t := time.NewTimer(g.spec.Drain)
	defer t.Stop()
	select {
	case <-t.C:
		g.cancelReqs(errDrained) // what is still in flight is judged (silence.go) or incomplete
	case <-g.reqCtx.Done():
	}
}

// ended is how many requests have ended so far (the progress bar's count).
func (g *rungState) ended() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.out.recs)
}

// completed sums the E2E of the measured successes ending at from or later, and counts them.
func (g *rungState) completed(from time.Duration) (sum time.Duration, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.out.recs {
		if r.ok() && !r.Warmup && r.end >= from {
			sum, n = sum+r.end-r.sent, n+1
		}
	}
	return sum, n
}

// meanE2E is the mean E2E of the measured requests that succeeded, and how many there were.
func (g *rungState) meanE2E() (time.Duration, int) {
	sum, n := g.completed(0)
	return sum / time.Duration(max(n, 1)), n
}

// watchLevel runs levelWatch on a steady rung.
func (g *rungState) watchLevel() {
	out := g.out
	stop := func() {
		g.mu.Lock()
		if out.stoppedAt == 0 { // an error stop may have come first
			out.stoppedAt = g.rn.c.since()
		}
		g.mu.Unlock()
		g.stopDispatch()
	}
	doneSince := func(t time.Duration) int {
		_, n := g.completed(out.start + t)
		return n
	}
	since := func() time.Duration { return g.rn.c.since() - out.start }
	levelWatch(g.dispatchCtx, stop, g.spec.Slice, g.spec.Duration, g.rn.c.marked.Load, g.inflight.Load, since, doneSince, out.level)
}

// newRec makes request k's record, prompt and output length; idx is its prompt (< 0: the next one).
func (g *rungState) newRec(k int, sched time.Duration, idx int) (*Record, dataset.Prompt, int) {
	rn, spec := g.rn, g.spec
	if idx < 0 {
		idx = int(rn.next.Add(1) - 1)
	}
	var p dataset.Prompt
	if sized, ok := rn.src.(interface{ PromptOf(i, n int) dataset.Prompt }); ok && spec.PromptTokens > 0 {
		p = sized.PromptOf(idx, spec.PromptTokens)
	} else {
		p = rn.src.Prompt(idx)
	}
	n := rn.outTokens
	if p.OutputTokens > 0 {
		n = p.OutputTokens
	}
	w := k < spec.WarmupReqs || (spec.WarmupDur > 0 && sched < g.out.start+spec.WarmupDur) // warm-up
	if !w && p.OutputTokens == 0 {
		g.mu.Lock()
		if g.out.shortTokens > 0 {
			n = g.out.shortTokens
		}
		g.mu.Unlock()
	}
	bytes := len(p.Text) // the whole prompt sent: a multi-turn request carries its history too
	for _, h := range p.History {
		bytes += len(h)
	}
	return &Record{Rung: spec.Index, Kind: spec.Kind, Index: idx, Warmup: w, sched: sched, promptTokens: p.Tokens, promptBytes: bytes}, p, n
}

// enough stops a sized rung past Duration with MinSamples done, and picks the shorter output.
func (g *rungState) enough() bool {
	spec, out := g.spec, g.out
	if !spec.sized() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if out.enough {
		return true // another slot stopped the rung: its window ends then
	}
	done, full := 0, []*Record{}
	for _, r := range out.recs {
		if r.ok() && r.RequestedTokens == g.rn.outTokens {
			full = append(full, r) // the warm-up request too: it says what a full request costs
		}
		if r.ok() && !r.Warmup {
			done++
		}
	}
	out.completed = done
	now := g.rn.c.since()
	if now >= out.start+spec.Duration && done >= spec.MinSamples {
		out.enough = true
		out.stoppedAt = now
		return true
	}
	if spec.Shorten && out.shortTokens == 0 && len(full) > 0 {
		out.shortTokens = shortLen(full, g.rn.outTokens, spec.MinSamples-done, out.start+spec.Duration-now)
	}
	return false
}

// closedSlot is one slot of a closed loop: it sends its next request as soon as the last one ended.
func (g *rungState) closedSlot() {
	free, first := g.rn.c.since(), true
	conv := g.rn.conversation()
	for g.dispatchCtx.Err() == nil {
		if g.enough() {
			g.stopDispatch()
			return
		}
		k := int(g.counter.Add(1) - 1)
		if g.total > 0 && k >= g.total {
			return
		}
		rec, p, n := g.newRec(k, free, conv())
		rec.noLag = first // a slot's first request pays the connection ramp, not client lag
		g.dispatched(k)
		g.rn.c.do(g.reqCtx, p, n, rec)
		g.add(rec)
		free, first = g.rn.c.since(), false
	}
}

// settleCut is the wait after a rung that cut requests: the engine drops them within a step or two.
const settleCut = time.Second

// settle waits settleCut after a rung whose drain bound cut requests (not on Ctrl-C).
func (rn *runner) settle(ctx context.Context, out *rungOut) {
	if out.interrupted || !slices.ContainsFunc(out.recs, func(r *Record) bool { return r.Incomplete }) {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(settleCut):
	}
}

// prewarm opens up to n keep-alive connections (GET /v1/models on each, at once) before a closed-loop
// rung, so its first wave measures inference, not TCP handshakes. Best effort, at most 10 s.
func (rn *runner) prewarm(ctx context.Context, n int) {
	if rn.c.ev != nil {
		// The event loop's own pool (even for one slot: net/http's holds the negotiation's).
		rn.c.ev.prewarm(ctx, n)
		return
	}
	if rn.modelsURL == "" || n < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Bodies stay unread until every request has its answer, so n requests hold n connections.
	var wg, answered sync.WaitGroup
	answered.Add(n)
	allAnswered := make(chan struct{})
	go func() { answered.Wait(); close(allAnswered) }()
	for range n {
		wg.Go(func() {
			resp, err := get(ctx, rn.c.hc, rn.modelsURL, rn.c.key)
			answered.Done()
			if err != nil {
				return
			}
			select {
			case <-allAnswered:
			case <-ctx.Done():
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		})
	}
	wg.Wait()
}

// openLoop sends on schedule (constant, seeded Poisson, or a trace's), at most MaxInFlight at once.
func (g *rungState) openLoop(wg *sync.WaitGroup) {
	rn, spec := g.rn, g.spec
	rng := rand.New(rand.NewPCG(rn.seed, uint64(spec.Index)+1))
	sem := make(chan struct{}, max(spec.MaxInFlight, 1))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	offset := time.Duration(0)
	for k := 0; g.total == 0 || k < g.total; k++ {
		if spec.Arrive != nil {
			offset = spec.Arrive(k)
		}
		if spec.Duration > 0 && offset >= spec.until() {
			return
		}
		sched := g.out.start + offset
		if d := sched - rn.c.since(); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-g.dispatchCtx.Done():
				return
			}
		}
		select {
		case sem <- struct{}{}:
		case <-g.dispatchCtx.Done():
			return
		}
		idx := -1
		if spec.Arrive != nil {
			idx = k // a replay sends the trace's request k
		}
		rec, p, n := g.newRec(k, sched, idx)
		g.dispatched(k)
		wg.Go(func() {
			defer func() { <-sem }()
			rn.c.do(g.reqCtx, p, n, rec)
			g.add(rec)
		})
		gap := 1 / spec.Rate
		if spec.Kind == kindPoisson {
			gap = rng.ExpFloat64() / spec.Rate
		}
		offset += time.Duration(gap * float64(time.Second))
	}
}

// fromOnset opens a steady rung's window at its level's onset: requests sent before it are its ramp,
// warm-up for the latencies (a lighter load), still counted in the completion rate (marked ramp).
func (o *rungOut) fromOnset(onset time.Duration) {
	o.rampEnd = onset
	for _, r := range o.recs {
		if r.sent < onset && !r.Warmup {
			r.Warmup, r.ramp = true, true
		}
	}
}

// skipRamp makes the first mean E2E of the rung warm-up (the in-flight count still building up), unless
// its requests take more than half its duration: skipping it would leave too little.
func (o *rungOut) skipRamp(e2e func() (time.Duration, int), dur time.Duration) {
	if d, n := e2e(); n > 0 && d <= dur/2 {
		o.fromOnset(o.start + d)
	}
}

// window sets the measured window: from the first measured request's send (or the warm-up duration's
// end) to when dispatch stopped; the tail drains outside it. When a request budget ends dispatch so
// early that the window would hold less than half the work, it closes at the last completion.
func (o *rungOut) window(spec rungSpec, lastDispatch, end time.Duration) {
	ws := o.start
	var lastEnd, firstMeasured time.Duration = 0, -1
	for _, r := range o.recs {
		lastEnd = max(lastEnd, r.end)
		if (!r.Warmup || r.ramp) && (firstMeasured < 0 || r.sent < firstMeasured) {
			firstMeasured = r.sent
		}
	}
	switch {
	case spec.WarmupDur > 0:
		ws = o.start + spec.WarmupDur
	case spec.WarmupReqs > 0 && firstMeasured >= 0:
		ws = firstMeasured // synchronous: the warm-up's end; concurrent slots: at once
	case spec.WarmupReqs > 0:
		ws = lastEnd
	}
	ws = max(ws, o.rampEnd)
	we := o.start + spec.until()
	if o.stoppedAt > 0 && o.stoppedAt < we {
		we = o.stoppedAt
	}
	switch {
	case o.interrupted:
		we = end
	case spec.MaxRequests > 0 && (spec.Duration == 0 || lastDispatch < o.start+spec.Duration):
		we = lastDispatch
		if we-ws < (lastEnd-ws)/2 {
			we = lastEnd
		}
	}
	o.winStart, o.winEnd = ws, max(min(we, end), ws)
}

// minShortOutput is the fewest output tokens a shortened synchronous request asks for: enough
// inter-token gaps per request for the ITL figure, and still a prefill-dominated TTFT.
const minShortOutput = 16

// shortLen is the output length that lets need more synchronous requests complete within left, from
// the full-length ones' mean TTFT and TPOT (0: full-length ones fit). The same prompt at concurrency
// 1 has the same prefill, so its TTFT is the same sample, and its gaps the same decode's.
func shortLen(full []*Record, fullTokens, need int, left time.Duration) int {
	if need <= 0 || fullTokens <= minShortOutput {
		return 0
	}
	var e2e, ttft, tpot float64
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for _, r := range full { // raw times: derive has not run yet
		e, t := ms(r.end-r.sent), ms(r.marks[0].at-r.sent)
		e2e += e
		ttft += t
		if r.OutputTokens > 1 {
			tpot += (e - t) / float64(r.OutputTokens-1)
		}
	}
	n := float64(len(full))
	e2e, ttft, tpot = e2e/n, ttft/n, tpot/n
	budget := float64(left) / 1e6 / float64(need) // ms per request
	if e2e <= budget {
		return 0
	}
	k := minShortOutput
	if tpot > 0 && budget > ttft {
		k = max(minShortOutput, int((budget-ttft)/tpot)+1)
	}
	if k >= fullTokens {
		return 0
	}
	return k
}

// bar shows a progress bar while the rung runs (by time, or by requests); the result stops it.
func (rn *runner) bar(spec rungSpec, start time.Duration, done func() int) func() {
	if rn.progress == nil {
		return func() {}
	}
	byTime := spec.Duration > 0
	limit := int64(spec.until() / (100 * time.Millisecond))
	if !byTime {
		limit = int64(spec.MaxRequests + spec.WarmupReqs)
	}
	b := progressbar.NewOptions64(limit, progressbar.OptionSetWriter(rn.progress),
		progressbar.OptionSetDescription(fmt.Sprintf("rung %d %-26s", spec.Index+1, spec.label())),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if byTime {
					b.Set64(min(limit, int64((rn.c.since()-start)/(100*time.Millisecond))))
				} else {
					b.Set64(int64(done()))
				}
				b.Describe(fmt.Sprintf("rung %d %-26s %6d req", spec.Index+1, spec.label(), done()))
			}
		}
	})
	return func() {
		close(stop)
		wg.Wait()
		b.Finish()
	}
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
