package sim

import (
	"slices"
	"sync/atomic"
	"time"
)

// Seq is one request inside the engine. The engine owns every field except the atomics, which the
// request's HTTP handler reads after a notification.
type Seq struct {
	ID     uint64
	Prompt int  // prompt tokens
	MaxOut int  // output tokens this request will produce (max_tokens, or its natural stop)
	Chat   bool // a chat completion: the frontend renders the chat template (Perf.Entry)
	// Blocks are the chained hashes of the prompt's full KV blocks (blockHashes): what the prefix
	// cache looks up (nil: the prompt shares nothing).
	Blocks []uint64
	// Received is when the HTTP server got the request: the modelled frontend cost counts from
	// here, so the server's own parsing is part of it, not added to it. Zero: from Driver.add.
	Received time.Time

	computed  int         // tokens whose KV is in the cache
	generated int         // tokens produced so far
	blocks    int         // KV blocks held
	aborted   bool        // the client went away: dropped at the next step
	held      int         // leading Blocks it holds in the prefix cache (hit or computed)
	gone      atomic.Bool // the same, for the fixed-mode driver

	// For the HTTP side: Generated mirrors generated, Done is set when the last token is out.
	Generated atomic.Int32
	Done      atomic.Bool
	// Notify (capacity 1) gets a value at every step that produced a token for this Seq.
	Notify chan struct{}
	// Due is when the oldest token the HTTP side has not taken yet was due (unix ns; 0: none):
	// drivers set it if unset, the stream takes it, so the simulator knows its own lag.
	Due atomic.Int64
}

// context is the sequence's full length: prompt plus what it generated.
func (s *Seq) context() int { return s.Prompt + s.generated }

// Engine is vLLM's V1 scheduler in miniature (doc.go). It has no clock: Step returns how long the
// step takes, and the driver decides when it ends. Not safe for concurrent use.
type Engine struct {
	perf       *Perf
	waiting    []*Seq // FIFO; preempted sequences go back to the front
	running    []*Seq
	freeBlocks int

	emitted  []*Seq       // reused: sequences that got a token in the last step
	finished []*Seq       // reused: sequences that finished in the last step
	prefix   *prefixCache // nil: prefix caching off

	// Counters for /metrics. PrefixQueries and PrefixHits count prompt tokens looked up in the
	// prefix cache and found there (vllm:prefix_cache_queries / _hits).
	PromptTokens, GenerationTokens, Preemptions int64
	PrefixQueries, PrefixHits                   int64
}

// NewEngine starts an empty engine on perf.
func NewEngine(perf *Perf) *Engine {
	e := &Engine{perf: perf, freeBlocks: perf.KVBlocks}
	if !perf.Cfg.NoPrefixCache {
		e.prefix = newPrefixCache()
	}
	return e
}

// Perf is the roofline the engine runs on.
func (e *Engine) Perf() *Perf { return e.perf }

// Add queues a request.
func (e *Engine) Add(s *Seq) {
	e.waiting = append(e.waiting, s)
	e.PromptTokens += int64(s.Prompt)
}

// Abort drops a request at the next step (its client is gone).
func (e *Engine) Abort(s *Seq) { s.aborted = true }

// Idle reports whether there is nothing to do.
func (e *Engine) Idle() bool { return len(e.waiting) == 0 && len(e.running) == 0 }

// Running and Waiting are the queue lengths (vllm:num_requests_running / _waiting).
func (e *Engine) Running() int { return len(e.running) }
func (e *Engine) Waiting() int { return len(e.waiting) }

// KVUsage is the fraction of KV blocks in use (vllm:kv_cache_usage_perc, 0..1).
func (e *Engine) KVUsage() float64 {
	if e.perf.KVBlocks == 0 {
		return 0
	}
	return 1 - float64(e.freeBlocks)/float64(e.perf.KVBlocks)
}

type scheduled struct {
	seq *Seq
	n   int
}

// Step schedules one engine step, applies it, and returns its duration with the sequences that got
// a token (emitted) and those that finished. The returned slices are reused by the next Step.
func (e *Engine) Step() (d time.Duration, emitted, finished []*Seq) {
	e.dropAborted()
	var plan []scheduled
	budget := e.perf.Cfg.MaxBatchedTokens
	bs := e.perf.Cfg.BlockSize

	// Running sequences first, in arrival order: decodes (1 token) and unfinished prefill chunks.
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(s.context()-s.computed, budget)
		need := blocksFor(s.computed+n, bs) - s.blocks
		for need > e.freeBlocks {
			// Out of KV: preempt the newest running sequence (recompute later), as vLLM does.
			victim := e.running[len(e.running)-1]
			e.preempt(victim)
			if victim == s {
				break
			}
		}
		if i >= len(e.running) || e.running[i] != s {
			break // s itself was preempted
		}
		e.freeBlocks -= need
		s.blocks += need
		e.fitCache()
		plan = append(plan, scheduled{s, n})
		budget -= n
	}
	// Then admit waiting requests while there is room in the batch, the budget and the KV cache.
	for len(e.waiting) > 0 && len(e.running) < e.perf.Cfg.MaxNumSeqs && budget > 0 {
		s := e.waiting[0]
		hit := e.cachedPrefix(s)
		n := min(s.context()-hit, budget)
		need := blocksFor(hit+n, bs) - s.blocks
		if need > e.freeBlocks {
			break // queue until KV frees up
		}
		if e.prefix != nil && s.computed == 0 {
			e.PrefixQueries += int64(s.Prompt)
			e.PrefixHits += int64(hit)
		}
		s.computed = hit
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		e.freeBlocks -= need
		s.blocks += need
		e.hold(s, hit)
		e.fitCache()
		plan = append(plan, scheduled{s, n})
		budget -= n
	}

	var b Batch
	for _, p := range plan {
		b.Tokens += p.n
		b.Seqs++
		b.AttnCtx += float64(p.n) * (float64(p.seq.computed) + float64(p.n)/2)
		b.KVRead += float64(p.seq.computed + p.n)
	}
	d = e.perf.StepTime(b)

	e.emitted, e.finished = e.emitted[:0], e.finished[:0]
	for _, p := range plan {
		s := p.seq
		s.computed += p.n
		e.hold(s, s.computed) // its newly full blocks are cached at once
		if s.computed < s.context() {
			continue // a prefill chunk: no token yet
		}
		s.generated++
		e.GenerationTokens++
		e.emitted = append(e.emitted, s)
		if s.generated >= s.MaxOut {
			e.finished = append(e.finished, s)
		}
	}
	for _, s := range e.finished {
		e.release(s)
	}
	return d, e.emitted, e.finished
}

// cachedPrefix is how many of a waiting sequence's tokens the prefix cache already holds: its
// leading full blocks found there, never the whole prompt (its last token is computed to give the
// first output, as in vLLM). A sequence past its first admission keeps what it computed.
func (e *Engine) cachedPrefix(s *Seq) int {
	if s.computed > 0 || e.prefix == nil || len(s.Blocks) == 0 {
		return s.computed
	}
	bs := e.perf.Cfg.BlockSize
	return e.prefix.lookup(s.Blocks[:min(len(s.Blocks), (s.Prompt-1)/bs)]) * bs
}

// hold caches the full prompt blocks of s's first tokens that it does not hold yet.
func (e *Engine) hold(s *Seq, tokens int) {
	if e.prefix == nil {
		return
	}
	if full := min(len(s.Blocks), min(tokens, s.Prompt)/e.perf.Cfg.BlockSize); full > s.held {
		e.prefix.hold(s.Blocks[s.held:full])
		s.held = full
	}
}

// fitCache evicts cached blocks an allocation reused.
func (e *Engine) fitCache() {
	if e.prefix != nil {
		e.prefix.fit(e.freeBlocks)
	}
}

func blocksFor(tokens, bs int) int { return (tokens + bs - 1) / bs }

// preempt frees a running sequence's KV and puts it at the front of the queue to recompute.
func (e *Engine) preempt(s *Seq) {
	e.release(s)
	s.computed = 0
	e.waiting = append([]*Seq{s}, e.waiting...)
	e.Preemptions++
}

// release frees a sequence's blocks and removes it from the running list (its cached blocks stay).
func (e *Engine) release(s *Seq) {
	e.freeBlocks += s.blocks
	s.blocks = 0
	if e.prefix != nil {
		e.prefix.release(s.Blocks[:s.held])
		s.held = 0
	}
	if i := slices.Index(e.running, s); i >= 0 {
		e.running = slices.Delete(e.running, i, i+1)
	}
}

func (e *Engine) dropAborted() {
	e.waiting = slices.DeleteFunc(e.waiting, func(s *Seq) bool { return s.aborted })
	for i := 0; i < len(e.running); {
		if s := e.running[i]; s.aborted {
			e.release(s)
			continue
		}
		i++
	}
}
