package load

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The workloads, as results.LoadWorkloads lists them (docs/workloads.md).
const (
	WorkloadSynthetic    = "synthetic"
	WorkloadSharedPrefix = "shared-prefix"
	WorkloadTrace        = "trace"
	WorkloadMultiTurn    = "multi-turn"
	WorkloadLongContext  = "long-context" // a ladder of context lengths (contextLadder)
)

// closedLoop are the profiles that keep a fixed number of streams.
var closedLoop = []string{kindSynchronous, kindConcurrency, kindThroughput}

// defaultTurns is a multi-turn session's default turns: enough for the history to outweigh the new
// turn (AIPerf's and GuideLLM's examples use a handful).
const defaultTurns = 4

// maxTurns bounds a session: its last request carries every turn before it.
const maxTurns = 256

// Workloads lists them, in the order help texts give them.
var Workloads = results.LoadWorkloads()

// defaultPrefixGroups is a shared-prefix workload's default prefixes: few enough to be cached early
// in a rung, several so that the cache must hold several.
const defaultPrefixGroups = 4

// workloadDefaults fills what a workload leaves implicit: shared prefixes given alone name the
// shared-prefix workload, whose prefix defaults to three quarters of the shortest prompt.
func workloadDefaults(c results.LoadConfig) results.LoadConfig {
	if c.Workload == "" {
		c.Workload = results.DefaultLoadConfig().Workload
		if c.PrefixCount > 0 && c.PrefixTokens > 0 {
			c.Workload = WorkloadSharedPrefix
		}
	}
	switch c.Workload {
	case WorkloadMultiTurn:
		c.Turns = cmp.Or(c.Turns, defaultTurns)
	case WorkloadSharedPrefix:
		c.PrefixCount = cmp.Or(c.PrefixCount, defaultPrefixGroups)
		c.PrefixTokens = cmp.Or(c.PrefixTokens, max(c.PromptMin*3/4, 1))
	}
	c.TraceSpeed = cmp.Or(c.TraceSpeed, results.DefaultLoadConfig().TraceSpeed)
	return c
}

// maxTraceSpeed bounds --trace-speed: a day's trace in under a minute and a half.
const maxTraceSpeed = 1000

// CheckWorkload checks a load's workload as the load will, and, when the engine's context length is
// known (maxModelLen > 0), that every traced request fits in it: a bad trace is bad input before any
// engine starts.
func CheckWorkload(c results.LoadConfig, maxModelLen int) error {
	c = Defaults(c)
	if err := validateWorkload(c); err != nil || c.Workload != WorkloadTrace || maxModelLen <= 0 {
		return err
	}
	t, err := dataset.LoadTrace(c.Trace)
	if err != nil {
		return err
	}
	for i, r := range t.Requests {
		if r.Input+r.Output > maxModelLen {
			return fmt.Errorf("trace %s: request %d (at %v) needs %d tokens (input %d + output %d), over the engine's max_model_len %d: raise engine.max_model_len or cut the trace",
				t.Name, i+1, r.At, r.Input+r.Output, r.Input, r.Output, maxModelLen)
		}
	}
	return nil
}

// validateWorkload checks a workload's own settings, loading a trace file (a bad line: exit 2).
func validateWorkload(c results.LoadConfig) error {
	if !slices.Contains(Workloads, c.Workload) {
		return fmt.Errorf("--workload %q: unknown; want one of %v", c.Workload, Workloads)
	}
	if err := firstBad(append(workloadFlags(c), workloadSettings(c)...)); err != nil {
		return err
	}
	if c.Workload != WorkloadTrace {
		return nil
	}
	t, err := dataset.LoadTrace(c.Trace)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	if span := t.Span().Seconds() / c.TraceSpeed; span > MaxDuration.Seconds() {
		return fmt.Errorf("--trace-speed %v: the trace's %v would last %.0f h, over the %v a load may: replay it faster", c.TraceSpeed, t.Span(), span/3600, MaxDuration)
	}
	return nil
}

// workloadFlags check that a workload comes with the flags and profile it needs, and no others.
func workloadFlags(c results.LoadConfig) []check {
	trace, synthetic := c.Workload == WorkloadTrace, c.Workload == WorkloadSynthetic
	return []check{
		{trace && c.Trace == "", "--workload trace: give the trace with --trace FILE (Mooncake JSONL: timestamp, input_length, output_length, hash_ids)"},
		{!trace && c.Trace != "", fmt.Sprintf("--trace %s: only --workload trace reads a trace", c.Trace)},
		{c.Profile == kindTrace && !trace, "--profile trace replays a trace's arrival times: give --workload trace --trace FILE"},
		{synthetic && (c.PrefixCount > 0 || c.PrefixTokens > 0), fmt.Sprintf("shared prefix %d×%d: give --workload shared-prefix (or leave --workload out)", c.PrefixCount, c.PrefixTokens)},
		{!synthetic && c.Data != "synthetic", fmt.Sprintf("--data %s: a prompt file is its own workload; leave --workload out", c.Data)},
		{c.Workload == WorkloadLongContext && !slices.Contains(closedLoop[:2], c.Profile), fmt.Sprintf("--workload long-context climbs context lengths at a fixed number of streams: give --profile concurrency (and --concurrency) or synchronous, not %s", c.Profile)},
	}
}

// workloadSettings are the checks of the context ladder's, sessions' and trace's settings.
func workloadSettings(c results.LoadConfig) []check {
	return []check{
		{c.ContextMax < 0 || c.ContextMax > MaxPromptTokens || c.ContextMax > 0 && c.Workload != WorkloadLongContext, fmt.Sprintf("--context-max %d: want the ladder's top context in tokens (up to %d), with --workload long-context", c.ContextMax, MaxPromptTokens)},
		{c.Workload == WorkloadMultiTurn && !slices.Contains(closedLoop, c.Profile), fmt.Sprintf("--workload multi-turn sends each session's turns in order, each after the reply before it, on one stream: give --profile concurrency (or synchronous, throughput), not %s", c.Profile)},
		{c.Turns < 0 || c.Turns > maxTurns || c.Turns > 0 && c.Workload != WorkloadMultiTurn, fmt.Sprintf("--turns %d: want 1..%d turns per session, with --workload multi-turn", c.Turns, maxTurns)},
		// A session's last request carries every turn before it: bounded like any prompt.
		{c.Turns > 0 && c.Turns <= maxTurns && c.Turns*(max(c.PromptTokens, c.PromptMax)+c.OutputTokens) > MaxPromptTokens, fmt.Sprintf("--turns %d: a session's last request would carry %d turns of up to %d prompt and %d output tokens, over %d tokens: use fewer turns or shorter prompts",
			c.Turns, c.Turns, max(c.PromptTokens, c.PromptMax), c.OutputTokens, MaxPromptTokens)},
		{c.TraceSpeed < 0 || c.TraceSpeed > maxTraceSpeed || math.IsNaN(c.TraceSpeed), fmt.Sprintf("--trace-speed %v: want a factor in (0, %d] (2: twice as fast as recorded)", c.TraceSpeed, maxTraceSpeed)},
	}
}

// withWorkload wraps the calibrated synthetic prompts in the workload's source.
func withWorkload(c results.LoadConfig, s *dataset.Synthetic) (dataset.Source, error) {
	if c.Workload == WorkloadMultiTurn {
		return &dataset.MultiTurn{Words: s, Turns: c.Turns, ReplyTokens: c.OutputTokens}, nil
	}
	if c.Workload != WorkloadTrace {
		return s, nil
	}
	t, err := dataset.LoadTrace(c.Trace)
	if err != nil {
		return nil, err
	}
	return &dataset.TraceSource{Trace: t, Words: s, Speed: c.TraceSpeed}, nil
}

// traceSpec is a trace replay's one rung: every request of the trace (or the first --max-requests)
// at its arrival time, no warm-up, its mean rate the rung's rate (the error stop's first wave).
func (ex *executor) traceSpec(src *dataset.TraceSource) rungSpec {
	s := ex.spec(kindTrace, 0, 0)
	n := src.Len()
	if ex.cfg.MaxRequests > 0 {
		n = min(n, ex.cfg.MaxRequests)
	}
	s.Duration, s.WarmupReqs, s.WarmupDur, s.MaxRequests = 0, 0, 0, n
	s.Arrive = src.Arrival
	span := src.Arrival(n - 1)
	s.Rate = float64(n)
	if span > 0 {
		s.Rate = float64(n) / span.Seconds()
	}
	s.Expect = span + s.Drain
	return s
}

// replayOf says how a trace rung kept its schedule, and the prompts counted at the trace's length.
func replayOf(out *rungOut, src *dataset.TraceSource) *results.Replay {
	rp := &results.Replay{Planned: out.spec.MaxRequests}
	if rp.Planned == 0 {
		return rp
	}
	var first, last time.Duration = -1, 0
	var lags []float64
	for _, r := range out.recs {
		if r.sent == 0 && r.Error != "" {
			continue // never written (refused before sending)
		}
		rp.Sent++
		if first < 0 || r.sent < first {
			first = r.sent
		}
		last = max(last, r.sent)
		lags = append(lags, float64(max(r.sent-r.sched, 0))/1e6)
		if r.PromptTokens > 0 {
			rp.PromptsCounted++
			if want := src.Trace.Requests[r.Index%src.Len()].Input; r.PromptTokens == want {
				rp.PromptsExact++
			}
		}
	}
	rp.PlannedSpanS = src.Arrival(rp.Planned - 1).Seconds()
	if rp.Sent > 0 {
		rp.SentSpanS = (last - first).Seconds()
		d := metrics.Summarize(lags)
		rp.LagP99Ms, rp.LagMaxMs = d.P99, d.Max
	}
	if rp.PlannedSpanS > 0 {
		rp.SpanErrorPct = (rp.SentSpanS - rp.PlannedSpanS) / rp.PlannedSpanS * 100
	}
	return rp
}

// prefixExpect is what an ideal prefix cache would hold of the prompts sent: the leading blocks an
// earlier prompt shared, never the last token (an engine computes it to give the first output).
type prefixExpect struct {
	seen        map[uint64]bool
	hit, tokens float64
}

// add counts the requests of one rung, in the order they were sent, that reached the server.
func (p *prefixExpect) add(src dataset.Source, recs []*Record) {
	pf, ok := src.(dataset.Prefixed)
	if !ok {
		return
	}
	if p.seen == nil {
		p.seen = map[uint64]bool{}
	}
	sent := slices.Clone(recs)
	slices.SortFunc(sent, func(a, b *Record) int { return int(a.sent - b.sent) })
	for _, r := range sent {
		n := r.PromptTokens
		if n == 0 {
			n = r.promptTokens
		}
		if n == 0 || !r.ok() && r.PromptTokens == 0 {
			continue // the server never counted it: no cache lookup to expect
		}
		blocks := pf.PrefixBlocks(r.Index)
		if len(blocks) == 0 && len(p.seen) == 0 {
			continue // nothing shared so far: no expectation to state
		}
		lead := 0
		for _, b := range blocks {
			if !p.seen[b.ID] {
				break
			}
			lead += b.Tokens
		}
		p.hit += float64(min(lead, n-1))
		p.tokens += float64(n)
		for _, b := range blocks {
			p.seen[b.ID] = true
		}
	}
}

// rate is the expected hit rate (nil when the workload shares nothing).
func (p *prefixExpect) rate() *float64 {
	if len(p.seen) == 0 || p.tokens == 0 {
		return nil
	}
	r := p.hit / p.tokens
	return &r
}

// contextRungs are a context ladder's prompt lengths: from the profile's, doubling, up to top, top last.
func contextRungs(from, top int) []int {
	var out []int
	for l := max(from, 1); l < top; l *= 2 {
		out = append(out, l)
	}
	return append(out, top)
}

// contextMargin keeps a ladder's top under the context length: the chat template's tokens.
const contextMargin = 64

// contextLadder runs the long-context workload: one rung per context length, its preemptions, KV-cache
// use and held requests read from /metrics around it. Two rungs out of KV cache end it.
func (ex *executor) contextLadder(ctx context.Context, a *attempt, n int) {
	top := ex.cfg.ContextMax
	if top == 0 {
		top = ex.modelLen
	}
	top -= ex.cfg.OutputTokens + contextMargin
	if top < 1 {
		a.err = fmt.Sprintf("long-context: the engine's context length is unknown or too short for %d output tokens: give --context-max (load.context_max)", ex.cfg.OutputTokens)
		return
	}
	conc, bound := slots(ex.o, ex.cfg), 0
	for _, l := range contextRungs(ex.cfg.PromptTokens, top) {
		s := ex.spec(ex.cfg.Profile, conc, 0)
		s.PromptTokens = l
		before := ex.sc.counters(ctx)
		ex.one(ctx, a, s, n)
		after := ex.sc.counters(ctx)
		r := &a.runs[len(a.runs)-1]
		r.ContextTokens = l
		if before.ok && after.ok {
			p := max(after.preemptions-before.preemptions, 0)
			kv, held := ex.sc.kvPressure(before.at, after.at, conc)
			r.Preemptions, r.KVUsageMax, r.HeldShare = &p, &kv, &held
			if r.KVBound() {
				bound++
			}
		}
		if a.interrupted || a.err != "" || ctx.Err() != nil || bound == 2 {
			return
		}
	}
}

// contextSummary reads a context ladder: the longest clean context, the first KV-bound, the expected.
func contextSummary(runs []results.Run, conc, out, kvTokens int) *results.ContextLadder {
	c := &results.ContextLadder{Concurrency: conc, KVCapacityTokens: kvTokens}
	known := true
	for _, r := range runs {
		if r.ContextTokens == 0 {
			continue
		}
		if r.Preemptions == nil {
			known = false
			break
		}
		if r.KVBound() {
			c.FirstKVBound = r.ContextTokens
			if *r.Preemptions > 0 {
				c.FirstPreempting = r.ContextTokens
			}
			break
		}
		c.LongestClean = r.ContextTokens
	}
	if !known {
		c.LongestClean, c.Note = 0, "the engine exports no preemption counter: KV pressure is not measured"
	}
	if kvTokens > 0 {
		for _, r := range runs {
			if r.ContextTokens > 0 && conc*(r.ContextTokens+out) > kvTokens {
				c.ExpectedFirstPreempting = r.ContextTokens
				break
			}
		}
	}
	return c
}

// modelLen is model's context length at /v1/models (vLLM's max_model_len; 0: not said).
func modelLen(ctx context.Context, hc *http.Client, url, model, key string) int {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := get(ctx, hc, url, key)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	return results.ModelMaxLen(resp.Body, model)
}
