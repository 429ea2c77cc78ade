package sim

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// TraceRecord is the ground truth of one request (refused ones too), one JSON line of --trace FILE,
// written when the request ends.
type TraceRecord struct {
	ID       uint64    `json:"id"`               // the server's request counter (1-based, arrival order)
	Server   string    `json:"server,omitempty"` // the endpoint's address, when several share a file
	Endpoint string    `json:"endpoint"`         // /v1/completions or /v1/chat/completions
	Stream   bool      `json:"stream"`
	Arrival  time.Time `json:"arrival"` // when the handler started (headers read)
	// Received is when the request's newest bytes reached the server's socket (the kernel's time;
	// absent where unavailable): a client's TTFT starts about here, and waits through Received → Arrival.
	Received         time.Time `json:"received,omitzero"`
	PromptTokens     int       `json:"prompt_tokens"`     // as usage.prompt_tokens and /tokenize count them
	CompletionTokens int       `json:"completion_tokens"` // tokens actually sent
	MaxTokens        int       `json:"max_tokens"`        // resolved max_tokens
	Planned          int       `json:"planned_tokens,omitempty"`
	Finish           string    `json:"finish_reason,omitempty"`
	Status           int       `json:"status"`          // HTTP status
	Fault            string    `json:"fault,omitempty"` // http_500, http_429, cut_stream, stall, malformed_chunk, client_gone
	// TokenMs is when each token left the server, in ms after Arrival (a non-streaming answer: all
	// at the moment the body was written).
	TokenMs []float64 `json:"token_ms"`
}

type traceWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func newTraceWriter(w io.Writer) *traceWriter { return &traceWriter{w: bufio.NewWriterSize(w, 64<<10)} }

func (t *traceWriter) write(r TraceRecord) {
	b, _ := json.Marshal(r)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	// Flush only at line boundaries, so servers sharing one file never interleave half lines.
	if t.w.Buffered() > 0 && t.w.Available() < len(b)+1 {
		if err := t.w.Flush(); err != nil {
			t.err = err
			return
		}
	}
	if _, err := t.w.Write(append(b, '\n')); err != nil {
		t.err = err
	}
}

func (t *traceWriter) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	return t.w.Flush()
}

// TTFTMs is the request's time to first token as its client sees it, in ms: from Received when
// known, else from Arrival (0: no token sent).
func (r TraceRecord) TTFTMs() float64 {
	if len(r.TokenMs) == 0 {
		return 0
	}
	if r.Received.IsZero() {
		return r.TokenMs[0]
	}
	return r.TokenMs[0] + float64(r.Arrival.Sub(r.Received).Nanoseconds())/1e6
}
