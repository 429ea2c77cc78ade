package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// TraceBlockTokens is how many prompt tokens one hash id of a Mooncake-format trace stands for: the
// block size of the traces Mooncake published, and what AIPerf and Dynamo's tools assume.
const TraceBlockTokens = 512

// Bounds of a trace: far beyond a real one, and below what would exhaust memory.
const (
	MaxTraceRequests    = 1_000_000
	maxTraceLine        = 1 << 20 // bytes: 8k hash ids of 100 digits
	maxTracePromptToken = 1 << 22
	maxTraceOutputToken = 1 << 20
	maxTraceSpan        = 7 * 24 * time.Hour
)

// TraceRequest is one line of a Mooncake-format trace: when the request arrived (since the
// trace's first), its prompt and output lengths in tokens, and the ids of its prompt's blocks of
// TraceBlockTokens tokens (two requests sharing leading ids share that prefix).
type TraceRequest struct {
	At      time.Duration
	Input   int
	Output  int
	HashIDs []int64
}

// Trace is a request trace, in arrival order.
type Trace struct {
	Name     string
	Requests []TraceRequest
}

// traceLine is a line as written: timestamp in milliseconds (an integer or not), the rest tokens.
type traceLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// LoadTrace reads a Mooncake-format JSONL trace from path (at most filelimit.Trace bytes).
func LoadTrace(path string) (*Trace, error) {
	raw, err := filelimit.Read(path, filelimit.Trace, "trace")
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	t, err := ParseTrace(raw)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	t.Name = filepath.Base(path)
	return t, nil
}

// ParseTrace reads a Mooncake-format trace: one JSON object per line with "timestamp" (ms since
// the first request), "input_length", "output_length" and "hash_ids". Errors name the line. Lines
// out of arrival order are put in order (stably: equal timestamps keep their order).
func ParseTrace(raw []byte) (*Trace, error) {
	t := &Trace{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), maxTraceLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(t.Requests) == MaxTraceRequests {
			return nil, fmt.Errorf("line %d: more than %d requests; cut the trace", line, MaxTraceRequests)
		}
		r, err := parseTraceLine(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		t.Requests = append(t.Requests, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w (a line is at most %d bytes)", line+1, err, maxTraceLine)
	}
	if len(t.Requests) == 0 {
		return nil, fmt.Errorf(`no requests (want JSONL lines {"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]})`)
	}
	slices.SortStableFunc(t.Requests, func(a, b TraceRequest) int { return int(a.At - b.At) })
	first := t.Requests[0].At
	for i := range t.Requests {
		t.Requests[i].At -= first // the first request is sent at once
	}
	return t, nil
}

func parseTraceLine(b []byte) (TraceRequest, error) {
	var l traceLine
	if err := json.Unmarshal(b, &l); err != nil {
		return TraceRequest{}, fmt.Errorf("not a JSON object (%w); want {\"timestamp\": ms, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]}", err)
	}
	switch {
	case l.Timestamp == nil:
		return TraceRequest{}, fmt.Errorf(`no "timestamp" (milliseconds since the trace's first request)`)
	case math.IsNaN(*l.Timestamp) || *l.Timestamp < 0 || *l.Timestamp > float64(maxTraceSpan/time.Millisecond):
		return TraceRequest{}, fmt.Errorf("timestamp %v: want milliseconds in [0, %d]", *l.Timestamp, maxTraceSpan/time.Millisecond)
	case l.InputLength == nil || *l.InputLength < 1 || *l.InputLength > maxTracePromptToken:
		return TraceRequest{}, fmt.Errorf(`"input_length" %s: want prompt tokens in [1, %d]`, orMissing(l.InputLength), maxTracePromptToken)
	case l.OutputLength == nil || *l.OutputLength < 1 || *l.OutputLength > maxTraceOutputToken:
		return TraceRequest{}, fmt.Errorf(`"output_length" %s: want output tokens in [1, %d]`, orMissing(l.OutputLength), maxTraceOutputToken)
	}
	if most := (*l.InputLength + TraceBlockTokens - 1) / TraceBlockTokens; len(l.HashIDs) > most {
		return TraceRequest{}, fmt.Errorf("%d hash_ids for input_length %d: a hash id stands for %d tokens, so at most %d", len(l.HashIDs), *l.InputLength, TraceBlockTokens, most)
	}
	for _, h := range l.HashIDs {
		if h < 0 {
			return TraceRequest{}, fmt.Errorf("hash id %d: want ≥ 0", h)
		}
	}
	at := time.Duration(*l.Timestamp * float64(time.Millisecond))
	return TraceRequest{At: at, Input: *l.InputLength, Output: *l.OutputLength, HashIDs: l.HashIDs}, nil
}

func orMissing(v *int) string {
	if v == nil {
		return "missing"
	}
	return fmt.Sprint(*v)
}

// Span is the time from the trace's first request to its last.
func (t *Trace) Span() time.Duration { return t.Requests[len(t.Requests)-1].At }

// TraceSource replays a trace's prompts: request i's prompt is built from its hash ids, each id a
// block of TraceBlockTokens words seeded by the id (the same id, the same words), then words of its
// own up to its input length; its output length is the trace's. Words come from a calibrated
// Synthetic, so lengths are exact where the Synthetic's are.
type TraceSource struct {
	Trace *Trace
	Words *Synthetic
	// Speed divides the trace's times (2: twice as fast); 0 or 1: as recorded.
	Speed float64
}

// Describe implements Source.
func (s *TraceSource) Describe() string { return "trace " + s.Trace.Name }

// Arrival is when request i is sent, from the replay's start.
func (s *TraceSource) Arrival(i int) time.Duration {
	at := s.Trace.Requests[i%len(s.Trace.Requests)].At
	if s.Speed > 0 && s.Speed != 1 {
		at = time.Duration(float64(at) / s.Speed)
	}
	return at
}

// Len is the number of requests in the trace.
func (s *TraceSource) Len() int { return len(s.Trace.Requests) }

// Prompt implements Source.
func (s *TraceSource) Prompt(i int) Prompt {
	r := s.Trace.Requests[i%len(s.Trace.Requests)]
	w := s.Words
	m := w.wordsFor(r.Input)
	block := max(w.wordsFor(TraceBlockTokens+w.Offset), 1) // a block's words, no offset of its own
	vocab := w.words()
	ws := make([]string, 0, m)
	for _, h := range r.HashIDs {
		if len(ws) >= m {
			break
		}
		ws = pickWords(ws, vocab, rand.New(rand.NewPCG(w.wordSeed(0x7261636500000000), uint64(h))), min(block, m-len(ws)))
	}
	ws = pickWords(ws, vocab, rand.New(rand.NewPCG(w.wordSeed(0x7461696c), uint64(i))), m-len(ws))
	ws[0], ws[len(ws)-1] = anchor, anchor
	p := Prompt{Text: strings.Join(ws, " "), OutputTokens: r.Output}
	if w.Exact {
		p.Tokens = r.Input
	}
	return p
}

// PrefixBlocks implements Prefixed: the request's hash ids, the last one holding what is left of
// its input length.
func (s *TraceSource) PrefixBlocks(i int) []PrefixBlock {
	r := s.Trace.Requests[i%len(s.Trace.Requests)]
	out := make([]PrefixBlock, len(r.HashIDs))
	for k, h := range r.HashIDs {
		out[k] = PrefixBlock{ID: uint64(h), Tokens: min(TraceBlockTokens, r.Input-k*TraceBlockTokens)}
	}
	return out
}
