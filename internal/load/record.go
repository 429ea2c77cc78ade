package load

import (
	"bufio"
	"encoding/json"
	"io"
	"time"
)

// mark is one chunk with generated text or tokens: when it arrived (since the load's epoch), its
// tokens (continuous usage, else set by finalize) and bytes; joint: it came in the chunk before's
// read, so its time is spaced, not its own.
type mark struct {
	at    time.Duration
	tok   int32
	bytes int32
	joint bool
}

// Record is one request, a JSON line of --records; times in ms since the load's start.
type Record struct {
	Rung   int    `json:"rung"`
	Kind   string `json:"kind"`
	Index  int    `json:"index"` // prompt index (seeded prompts are reproducible by index)
	Warmup bool   `json:"warmup,omitempty"`
	// Attempt is 2 for requests of a sweep's retry.
	Attempt int `json:"attempt,omitempty"`

	ScheduledMs float64 `json:"scheduled_ms"`
	SentMs      float64 `json:"sent_ms"` // request fully written to the connection
	FirstMs     float64 `json:"first_token_ms,omitempty"`
	EndMs       float64 `json:"end_ms"`
	// LagMs is how far behind its schedule the client wrote the request.
	LagMs float64 `json:"lag_ms"`
	// TTFTMs: written -> first chunk with generated content. TTFTFromScheduleMs: scheduled -> same.
	TTFTMs float64 `json:"ttft_ms,omitempty"`
	// A reasoning answer: TTFTMs counts its first token of any kind, TTFOMs its first past the
	// reasoning (AIPerf's), ReasoningMs from the first reasoning token to it. Zero: no reasoning.
	TTFOMs             float64   `json:"ttfo_ms,omitempty"`
	ReasoningMs        float64   `json:"reasoning_ms,omitempty"`
	TTFTFromScheduleMs float64   `json:"ttft_from_schedule_ms,omitempty"`
	E2EMs              float64   `json:"e2e_ms,omitempty"`
	TPOTMs             float64   `json:"tpot_ms,omitempty"`
	ITLMs              []float64 `json:"itl_ms,omitempty"` // per token, gaps divided by tokens per chunk

	PromptTokens    int    `json:"prompt_tokens,omitempty"` // from usage, else the prompt's exact count
	OutputTokens    int    `json:"output_tokens"`
	RequestedTokens int    `json:"requested_tokens"`
	Chunks          int    `json:"chunks"`
	Counts          string `json:"counts,omitempty"`     // where output token counts came from
	Error           string `json:"error,omitempty"`      // class: http_<code>, timeout, cut_stream, …
	Detail          string `json:"detail,omitempty"`     // the error's words, or why the request is incomplete
	Incomplete      bool   `json:"incomplete,omitempty"` // cut by the drain bound or Ctrl-C
	// UsageClaim and PromptClaim are server usage counts not believed (over max_tokens, or more than
	// the prompt can hold): the counts above are then gpuvet's own.
	UsageClaim  int `json:"usage_completion_tokens,omitempty"`
	PromptClaim int `json:"usage_prompt_tokens,omitempty"`
	// NewConnection: the request opened a connection (it was not reused from the keep-alive pool).
	NewConnection bool `json:"new_connection,omitempty"`
	// ConnectMs is the wait for a new connection: the server's accept, not the client's lag.
	ConnectMs float64 `json:"connect_ms,omitempty"`

	sched, start, sent, end     time.Duration
	firstReasoning, firstOutput time.Duration // the first reasoning and answer text (0: none)
	marks                       []mark
	contUsage                   bool
	promptTokens                int // the prompt's exact count, when known
	promptBytes                 int // the prompt's length in bytes (a bound on its tokens)
	beat                        *pulse
	noLag                       bool // a closed-loop slot's first request: its lag is the connection ramp
	ramp                        bool // sent before a steady rung's onset: warm-up for latency, counted in req/s
	connect                     time.Duration
	// rxLag sums how long rxN kernel-timed chunks waited in the socket.
	rxLag time.Duration
	rxN   int
	// RXLagMs is the mean of those waits (0: no kernel receive times).
	RXLagMs float64 `json:"rx_lag_ms,omitempty"`
}

// Output-count sources, most exact first.
const (
	countsContinuous = "continuous_usage_stats"
	countsUsage      = "usage"
	countsUsageSplit = "usage (split over chunks by text length)"
	countsChunks     = "chunks (no usage from the server: one token per chunk assumed)"
	countsDisputed   = "chunks (the server's usage counted more than max_tokens: not believed)"
)

// templateTokens bounds a chat template's tokens: a prompt count beyond its bytes and them is not believed.
const templateTokens = 4096

// tokenBound is the most output tokens a request can be credited with: its max_tokens, or chunks.
func tokenBound(r *Record) int {
	if r.RequestedTokens > 0 {
		return r.RequestedTokens
	}
	return len(r.marks)
}

// finalize fills per-chunk and output token counts once the stream is over. The server's counts are
// claims: none beyond tokenBound is believed (nor sizes an allocation).
func (r *Record) finalize(final *usage) {
	r.Chunks = len(r.marks)
	r.PromptTokens = r.promptTokens
	if final != nil && final.PromptTokens > 0 {
		if r.promptBytes > 0 && final.PromptTokens > r.promptBytes+templateTokens {
			r.PromptClaim = final.PromptTokens
		} else {
			r.PromptTokens = final.PromptTokens
		}
	}
	perChunk := false // one token per chunk
	switch {
	case final != nil && final.CompletionTokens > tokenBound(r):
		r.UsageClaim, r.Counts, r.OutputTokens, perChunk = final.CompletionTokens, countsDisputed, len(r.marks), true
	case r.contUsage:
		r.Counts, r.OutputTokens = countsContinuous, final.CompletionTokens
	case final != nil && final.CompletionTokens == len(r.marks):
		r.Counts, r.OutputTokens, perChunk = countsUsage, final.CompletionTokens, true
	case final != nil && len(r.marks) > 0:
		r.Counts, r.OutputTokens = countsUsageSplit, final.CompletionTokens
		splitByBytes(r.marks, final.CompletionTokens)
	case final != nil:
		r.Counts, r.OutputTokens = countsUsage, final.CompletionTokens
	default:
		r.Counts, r.OutputTokens, perChunk = countsChunks, len(r.marks), true
	}
	if perChunk {
		for i := range r.marks {
			r.marks[i].tok = 1
		}
	}
}

// splitByBytes shares total tokens over chunks in proportion to their text, keeping the sum exact.
func splitByBytes(marks []mark, total int) {
	var bytes int
	for _, m := range marks {
		bytes += int(max(m.bytes, 1))
	}
	given := 0
	for i, m := range marks {
		share := total * int(max(m.bytes, 1)) / bytes
		marks[i].tok = int32(share)
		given += share
	}
	for i := 0; given < total; i = (i + 1) % len(marks) {
		marks[i].tok++
		given++
	}
}

// ok reports whether the request completed without error and was measured.
func (r *Record) ok() bool { return r.Error == "" && !r.Incomplete && len(r.marks) > 0 }

// derive computes the latency figures from the raw times (called once the request is over).
func (r *Record) derive() {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	r.ScheduledMs, r.SentMs, r.EndMs = ms(r.sched), ms(r.sent), ms(r.end)
	r.LagMs = max(0, ms(r.sent-r.sched-r.connect)) // the server's accept is not the client's lag
	if r.rxN > 0 {
		r.RXLagMs = ms(r.rxLag) / float64(r.rxN)
	}
	r.Chunks = len(r.marks)
	if !r.ok() {
		return
	}
	first := r.marks[0].at
	r.FirstMs = ms(first)
	r.TTFTMs = ms(first - r.sent)
	r.TTFTFromScheduleMs = ms(first - r.sched)
	if r.firstReasoning > 0 && r.firstOutput > 0 {
		r.TTFOMs, r.ReasoningMs = ms(r.firstOutput-r.sent), ms(r.firstOutput-r.firstReasoning)
	}
	r.E2EMs = ms(r.end - r.sent)
	if r.OutputTokens > 1 {
		r.TPOTMs = (r.E2EMs - r.TTFTMs) / float64(r.OutputTokens-1)
	}
	gaps := 0
	for _, m := range r.marks[1:] {
		gaps += int(max(m.tok, 0))
	}
	r.ITLMs = make([]float64, 0, gaps) // the marks' tokens, bounded when they were counted (finalize)
	last := first
	for _, m := range r.marks[1:] {
		if m.tok <= 0 {
			continue // text without a new token (e.g. a detokenizer flush): the gap runs on
		}
		gap := ms(m.at-last) / float64(m.tok)
		for range m.tok {
			r.ITLMs = append(r.ITLMs, gap)
		}
		last = m.at
	}
}

// writeRecords writes records as JSON lines.
func writeRecords(w io.Writer, recs []*Record) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}
