package load

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
)

// A request that stops is an error of its own kind, judged against what the load has seen so far,
// never a short fixed timeout: a slow engine that keeps streaming is never cut, while a stream that
// stops, or a request never answered, is counted by the error gate instead of lost in the drain.
const (
	// errStalled: a stream with no token for stallGaps times the longest inter-token gap seen so far
	// (its own, or any stream's of the load), at least the floor, at most the stall timeout.
	errStalled = "stalled"
	// errNoAnswer: a request with no first token for answerTTFTs times the longest TTFT seen so far,
	// at least the floor, while a request started later (by more than that TTFT) has had its first
	// (an engine answers its queue in order, so waiting behind it is not unanswered). Before any
	// first token of the load, only the end of the rung judges one.
	errNoAnswer = "no_answer"
	stallGaps   = 20
	answerTTFTs = 10
	// stallTTFTs: the stall limit is at least this many times the longest TTFT seen: an engine that
	// prefills newly arrived requests pauses every stream for about that long.
	stallTTFTs = 2
	// DefaultSilenceFloor is the least silence ever judged (Options.SilenceFloor).
	DefaultSilenceFloor = 10 * time.Second
	// watchMin bounds how often a request's watchdog looks again.
	watchMin = 100 * time.Millisecond
)

// silence is a watchdog's verdict: the cause a request's context ends with, and its classification.
type silence struct{ kind, detail string }

func (s *silence) Error() string { return s.kind + ": " + s.detail }

// pace is what the load has seen so far: the longest gap between two tokens of a stream, the longest
// TTFT, and the latest start of a request that has had its first token.
type pace struct{ maxGap, maxTTFT, answeredStart atomic.Int64 }

// pulse is one request's progress, written by its reader and read by its watchdog's timer.
type pulse struct {
	first, last, maxGap atomic.Int64 // since the load's epoch (first, last: 0 before the first token)
	tokens              atomic.Int64 // chunks with tokens
}

// reset forgets what the setup's requests showed (timed before the load's epoch).
func (p *pace) reset() {
	p.maxGap.Store(0)
	p.maxTTFT.Store(0)
	p.answeredStart.Store(0)
}

func raise(a *atomic.Int64, v int64) {
	for old := a.Load(); v > old && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}

// beat records a chunk with tokens of rec, received at.
func (c *client) beat(rec *Record, at time.Duration) {
	p := rec.beat
	if p == nil {
		return
	}
	at = max(at, 1) // 0 means "none yet"
	if last := time.Duration(p.last.Load()); last == 0 {
		p.first.Store(int64(at))
		raise(&c.pace.maxTTFT, int64(at-rec.start))
		raise(&c.pace.answeredStart, int64(rec.start))
	} else if gap := at - last; gap > 0 {
		raise(&p.maxGap, int64(gap))
		raise(&c.pace.maxGap, int64(gap))
	}
	p.last.Store(int64(at))
	p.tokens.Add(1)
}

func (c *client) silenceFloor() time.Duration { return cmp.Or(max(c.floor, 0), DefaultSilenceFloor) }

// capped is d, at most the stall timeout when there is one.
func (c *client) capped(d time.Duration) time.Duration {
	if c.stall > 0 {
		return min(d, c.stall)
	}
	return d
}

// limits are the silences rec may keep now: before its first token (0: no reference yet) and after.
func (c *client) limits(p *pulse) (answer, stall time.Duration) {
	floor := c.silenceFloor()
	if ttft := time.Duration(c.pace.maxTTFT.Load()); ttft > 0 {
		answer = max(floor, answerTTFTs*ttft)
	}
	gap := time.Duration(max(p.maxGap.Load(), c.pace.maxGap.Load()))
	return answer, c.capped(max(floor, stallGaps*gap, stallTTFTs*time.Duration(c.pace.maxTTFT.Load())))
}

// judge says whether rec, silent until now, has stalled or gone unanswered (nil: not yet); next is
// when to look again. final: the request is being ended anyway, and one with no first token after
// the floor, with no other answer to compare to, is then unanswered too.
func (c *client) judge(rec *Record, now time.Duration, final bool) (*silence, time.Duration) {
	p := rec.beat
	if p == nil {
		return nil, time.Hour
	}
	answer, stall := c.limits(p)
	floor := c.silenceFloor()
	if last := time.Duration(p.last.Load()); last > 0 {
		silent := now - last
		if silent >= stall {
			return &silence{errStalled, fmt.Sprintf("no token for %s after %d chunks with tokens (longest gap so far %s in this stream, %s in the load; the limit %s is %d× the longest gap, at least %s%s)",
				secs(silent), p.tokens.Load(), secs(time.Duration(p.maxGap.Load())), secs(time.Duration(c.pace.maxGap.Load())), secs(stall), stallGaps, secs(floor), c.ceiling())}, 0
		}
		return nil, stall - silent
	}
	waited := now - rec.start
	// Overtaken: a request started more than the longest TTFT after this one has had its first
	// token (requests started together arrive in any order); when the rung ends, any later one.
	margin := time.Duration(c.pace.maxTTFT.Load())
	if final {
		margin = 0
	}
	overtaken := time.Duration(c.pace.answeredStart.Load())-margin > rec.start
	switch {
	case answer > 0 && waited >= answer && !overtaken:
		return nil, floor // queued behind requests not yet answered: not judged
	case answer > 0 && waited >= answer:
		return &silence{errNoAnswer, fmt.Sprintf("no first token %s after the request was sent, while later requests had theirs (longest TTFT so far %s; the limit %s is %d× that, at least %s)",
			secs(waited), secs(time.Duration(c.pace.maxTTFT.Load())), secs(answer), answerTTFTs, secs(floor))}, 0
	case answer == 0 && final && waited >= floor:
		return &silence{errNoAnswer, fmt.Sprintf("no first token %s after the request was sent, when the rung ended; no request of the load had had one", secs(waited))}, 0
	case answer > 0:
		return nil, answer - waited
	}
	return nil, floor
}

func (c *client) ceiling() string {
	if c.stall > 0 {
		return ", at most " + secs(c.stall)
	}
	return ""
}

// watch starts rec's watchdog: it cancels the request with a *silence cause; stop ends it.
func (c *client) watch(rec *Record, cancel func(error)) (stop func()) {
	p := &pulse{}
	rec.beat = p
	var done atomic.Bool
	var timer atomic.Pointer[time.Timer] // set before the timer can fire: its function reads it
	first := c.capped(c.silenceFloor())
	t := time.AfterFunc(time.Duration(math.MaxInt64), func() {
		if done.Load() {
			return
		}
		q, next := c.judge(rec, c.since(), false)
		if q != nil {
			cancel(q)
			return
		}
		timer.Load().Reset(max(next, watchMin))
	})
	timer.Store(t)
	t.Reset(first)
	return func() {
		done.Store(true)
		t.Stop()
	}
}

// incompleteReason says why a request the load itself ended (drain bound, stop) was not judged.
func (c *client) incompleteReason(rec *Record, cause error) string {
	why := "interrupted"
	for _, e := range []error{errDrained, errSetup} {
		if errors.Is(cause, e) {
			why = e.Error()
		}
	}
	p := rec.beat
	if p == nil || p.last.Load() == 0 {
		return fmt.Sprintf("%s %s after it was sent, before its first token", why, secs(rec.end-rec.start))
	}
	return fmt.Sprintf("%s while streaming (%d chunks with tokens, the last %s before)", why, p.tokens.Load(), secs(rec.end-time.Duration(p.last.Load())))
}

func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), ".0") + " s"
}

// redact takes the API key out of s, and every start of it of 8 characters or more (a cut echo).
func redact(s, key string) string {
	if key == "" {
		return s
	}
	s = strings.ReplaceAll(s, key, "[redacted]")
	lead := key[:min(8, len(key))]
	var b strings.Builder
	for {
		i := strings.Index(s, lead)
		if i < 0 {
			break
		}
		n := len(lead)
		for n < len(key) && i+n < len(s) && s[i+n] == key[n] {
			n++
		}
		b.WriteString(s[:i])
		b.WriteString("[redacted]")
		s = s[i+n:]
	}
	b.WriteString(s)
	return b.String()
}
