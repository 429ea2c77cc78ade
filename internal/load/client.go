package load

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/netstamp"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Error classes a request can end in (the keys of results.Run.Errors).
const (
	errConnect   = "connect"
	errTimeout   = "timeout"
	errCut       = "cut_stream"
	errMalformed = "malformed_chunk"
	errShort     = "short_output"
	errStream    = "stream_error" // the server sent an {"error": …} object inside the stream
	// errOverMax: more tokens than max_tokens (by chunks or usage): the server ignores max_tokens.
	errOverMax = "over_max_tokens"
	// errRedirect: a 3xx answer, never followed (the key would go to the target).
	errRedirect = "redirect"
	// errNotSSE: a 200 answer that is not an event stream; the detail says what came back.
	errNotSSE = "not_event_stream"
	// errStalled and errNoAnswer: see silence.go.
)

var errReqDeadline = errors.New("request exceeded its timeout")

// client sends one streamed completion at a time per call; it is safe for concurrent use.
type client struct {
	hc         *http.Client
	endpoint   string // full URL of /v1/chat/completions or /v1/completions
	chat       bool
	model      string
	key        string // from the environment only; never logged
	reqTimeout time.Duration
	// stall, floor: Options.StallTimeout, SilenceFloor; pace: what silences are judged by (silence.go).
	stall time.Duration
	floor time.Duration
	pace  pace
	epoch time.Time
	// dropped lists the optional request parameters this endpoint refused (negotiate): not sent.
	dropped []string
	// marked counts chunks with generated text over the load (the early-stop watcher's rate).
	marked atomic.Int64
	rx     *rxStatus // how chunk times are taken
	ev     *evReader // the event-loop reader (nil: net/http reads the streams; pickReader)
}

// rxStatus collects, over a load's connections, whether chunk times are the kernel's receive times.
type rxStatus struct {
	mu      sync.Mutex
	kernel  int    // connections with kernel receive timestamps
	without string // why one was without ("": none)
	// reader says which reader read the streams, and why (results.ClientCheck.Reader).
	reader string
	// The event loop's reads with tokens, those with several of one stream, and their events.
	reads, multiReads, multiEvents int
	// The fastest and slowest poll intervals its loops chose (0: no loop).
	pollLo, pollHi time.Duration
}

// addReads adds one event loop's reads and the range of poll intervals it chose.
func (s *rxStatus) addReads(reads, multi, events int, pollLo, pollHi time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads += reads
	s.multiReads += multi
	s.multiEvents += events
	if s.pollLo == 0 || pollLo < s.pollLo {
		s.pollLo = pollLo
	}
	s.pollHi = max(s.pollHi, pollHi)
}

func (s *rxStatus) note(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.kernel++
	case s.without == "":
		s.without = err.Error()
	}
}

// String is the result's account of chunk times.
func (s *rxStatus) String() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A read's time is its newest segment's kernel time, or the read time. net/http's reader gives
	// every event of a read that time; the event loop spaces a stream's events that share a read.
	multi := "; SSE events that arrive in one read share its time"
	if s.reads > 0 {
		multi = fmt.Sprintf("; %d of %d reads with tokens (%.2f %%) carried several token events (%d), spaced evenly between when the socket was last seen empty and the read's time", s.multiReads, s.reads, 100*float64(s.multiReads)/float64(s.reads), s.multiEvents)
		if s.pollHi > 0 {
			multi += fmt.Sprintf("; polled every %v to %v", s.pollLo, s.pollHi)
		}
	}
	switch {
	case s.without == "":
		return netstamp.Kernel + multi
	case s.kernel == 0:
		return "read time (kernel receive timestamps unavailable: " + s.without + "); a late client reads a backlog of chunks as arriving together" + multi
	}
	return netstamp.Kernel + "; some connections fell back to read time (" + s.without + ")" + multi
}

// Optional parameters, in the order they are given up when an endpoint refuses them with HTTP 400.
const (
	paramContinuous = "stream_options.continuous_usage_stats"
	paramExact      = "min_tokens+ignore_eos"
	paramUsage      = "stream_options"
)

func (c *client) sends(param string) bool { return !slices.Contains(c.dropped, param) }

// newHTTPClient makes a keep-alive HTTP/1.1 client with one connection per in-flight slot. With rx set,
// each connection asks the kernel for receive timestamps (rx records where it cannot); TLS keeps them
// (netstamp.RXTime looks through the TLS connection to the TCP one).
func newHTTPClient(slots int, rx *rxStatus) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	dial := d.DialContext
	if rx != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c, err = netstamp.Enable(c)
			rx.note(err)
			return c, nil
		}
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		MaxIdleConns:          slots + 16,
		MaxIdleConnsPerHost:   slots + 16,
		MaxConnsPerHost:       slots + 16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // bounded by the request's own timeout: TTFT under overload can be long
		DisableCompression:    true,
		ForceAttemptHTTP2:     false, // one connection per slot, as the measurement assumes
		ReadBufferSize:        2048,  // SSE chunks are a few hundred bytes; 10,000 streams hold one each
		WriteBufferSize:       1024,  // a larger request body streams through it
	}
	return &http.Client{Transport: tr, CheckRedirect: noRedirects}
}

// noRedirects makes a redirect the answer itself: followed, it would send the API key to its target
// and measure another server. Both readers then report it as errRedirect, naming the target.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// apiKey reads the key from the named environment variable (default OPENAI_API_KEY).
func apiKey(env string) string { return os.Getenv(cmp.Or(env, "OPENAI_API_KEY")) }

// get sends a GET of url, with key as its bearer token when there is one.
func get(ctx context.Context, hc *http.Client, url, key string) (*http.Response, error) {
	req, err := newRequest(ctx, http.MethodGet, url, key, nil)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}

// newRequest makes a request, with key as its bearer token when there is one.
func newRequest(ctx context.Context, method, url, key string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err == nil && key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req, err
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats,omitempty"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// request is the body sent. ignore_eos and min_tokens ask vLLM/SGLang for exactly max_tokens tokens.
type request struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages,omitempty"`
	Prompt        *string        `json:"prompt,omitempty"`
	MaxTokens     int            `json:"max_tokens"`
	MinTokens     int            `json:"min_tokens,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	Temperature   float64        `json:"temperature"`
}

func (c *client) body(p dataset.Prompt, out int) []byte {
	r := request{Model: c.model, MaxTokens: out, Stream: true}
	if c.sends(paramExact) {
		r.MinTokens, r.IgnoreEOS = out, true
	}
	if c.sends(paramUsage) {
		r.StreamOptions = &streamOptions{IncludeUsage: true, ContinuousUsageStats: c.sends(paramContinuous)}
	}
	if c.chat {
		for i, h := range p.History { // user and assistant take turns, a user's first
			r.Messages = append(r.Messages, message{Role: [2]string{"user", "assistant"}[i%2], Content: h})
		}
		r.Messages = append(r.Messages, message{Role: "user", Content: p.Text})
	} else {
		text := p.Text
		if len(p.History) > 0 {
			text = strings.Join(append(slices.Clone(p.History), p.Text), "\n\n")
		}
		r.Prompt = &text
	}
	b, _ := json.Marshal(r) // cannot fail: plain strings and numbers
	return b
}

// negotiate sends one short request; while the endpoint answers HTTP 400, it gives up the optional
// parameters one by one and tries again, so that OpenAI-compatible servers that are not vLLM get a
// load they accept. Refusing even the plain request, or no answer before ctx ends, is an error.
func (c *client) negotiate(ctx context.Context, p dataset.Prompt) error {
	for _, give := range []string{"", paramContinuous, paramExact, paramUsage} {
		if give != "" {
			c.dropped = append(c.dropped, give)
		}
		t0 := time.Now()
		rec := c.probe(ctx, p)
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s sent no token of the first streamed request in %s (%d tries; %s): the server takes requests but does not generate: check its log",
				ErrNotServing, results.RedactURLs(c.endpoint), time.Since(t0).Round(100*time.Millisecond), probeTries, setupWhat(rec))
		}
		if rec.Error != "http_400" {
			return nil // other failures are the load's to count, not a reason to give anything up
		}
	}
	return fmt.Errorf("%w: %s answers HTTP 400 even to a plain streamed request: %s", ErrNotServing, results.RedactURLs(c.endpoint), "check --api (chat or completions) and --model")
}

// ErrNotServing marks a failure of the load's setup: the endpoint answered no request the load
// needs before it starts (prompt sizing, the first streamed request), so nothing was measured.
var ErrNotServing = errors.New("the endpoint served no request before the load")

// setupWhat says how the last setup request ended when it was more than the bound running out.
func setupWhat(rec *Record) string {
	if rec.Detail != "" && !strings.Contains(rec.Detail, errSetup.Error()) {
		return "the last: " + rec.Detail
	}
	return "the last still waiting for its first token"
}

// probeTries is how many times the negotiation's request is sent before a server that does not
// answer it is an error: one request that stalls is not the endpoint's verdict.
const probeTries = 3

// probe sends the negotiation's request, each try getting an equal share of ctx's deadline.
func (c *client) probe(ctx context.Context, p dataset.Prompt) *Record {
	var rec *Record
	for try := range probeTries {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if end, ok := ctx.Deadline(); ok {
			tctx, cancel = context.WithTimeout(ctx, time.Until(end)/time.Duration(probeTries-try))
		}
		rec = &Record{}
		c.doHTTP(tctx, p, 2, rec)
		answered := tctx.Err() == nil
		cancel()
		if answered || ctx.Err() != nil {
			break
		}
	}
	return rec
}

// do sends one request with the load's reader. It never panics on server input; it sets rec.end.
func (c *client) do(ctx context.Context, p dataset.Prompt, out int, rec *Record) {
	if c.ev == nil {
		c.doHTTP(ctx, p, out, rec)
		return
	}
	ctx, cancel, end := c.begin(ctx, out, rec)
	defer end()
	c.ev.do(ctx, cancel, c.body(p, out), rec)
}

// begin starts rec's clock, timeout and watchdog (silence.go), all ended by end.
func (c *client) begin(ctx context.Context, out int, rec *Record) (context.Context, context.CancelCauseFunc, func()) {
	rec.RequestedTokens = out
	rec.marks = make([]mark, 0, min(out, 1<<16)) // one mark per token at most: no regrowth garbage
	rec.start = c.since()
	ctx, cancel := context.WithCancelCause(ctx)
	deadline := time.AfterFunc(c.reqTimeout, func() { cancel(errReqDeadline) })
	stopWatch := c.watch(rec, cancel)
	return ctx, cancel, func() { stopWatch(); deadline.Stop(); cancel(nil) }
}

// doHTTP is do with net/http.
func (c *client) doHTTP(ctx context.Context, p dataset.Prompt, out int, rec *Record) {
	ctx, cancel, end := c.begin(ctx, out, rec)
	defer end()
	req, err := newRequest(ctx, http.MethodPost, c.endpoint, c.key, bytes.NewReader(c.body(p, out)))
	if err != nil {
		c.fail(rec, errConnect, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// WroteRequest runs on the transport's writer goroutine: hand the time over atomically.
	var wroteAt, getConnAt, gotConnAt atomic.Int64
	var newConn atomic.Bool
	var conn atomic.Value // net.Conn
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { getConnAt.Store(int64(c.since())) },
		GotConn: func(i httptrace.GotConnInfo) {
			newConn.Store(!i.Reused)
			gotConnAt.Store(int64(c.since()))
			conn.Store(connBox{i.Conn})
		},
		ConnectDone:  func(string, string, error) { gotConnAt.CompareAndSwap(0, int64(c.since())) }, // a refused dial
		WroteRequest: func(httptrace.WroteRequestInfo) { wroteAt.Store(int64(c.since())) },
	}))
	resp, err := c.hc.Do(req)
	rec.sent = cmp.Or(time.Duration(wroteAt.Load()), rec.start)
	rec.NewConnection = newConn.Load()
	if rec.NewConnection || err != nil {
		rec.setConnect(getConnAt.Load(), gotConnAt.Load())
	}
	if err != nil {
		class := errConnect
		if wroteAt.Load() != 0 {
			class = errCut
		}
		c.failCtx(ctx, rec, class, err)
		return
	}
	defer func() {
		// Let the connection be reused, within bounds: a held-open response must not hold the request.
		t := time.AfterFunc(drainTimeout, func() { resp.Body.Close() })
		io.CopyN(io.Discard, resp.Body, drainLimit)
		t.Stop()
		resp.Body.Close()
	}()
	cb, _ := conn.Load().(connBox)
	c.response(ctx, cancel, resp, rec, cb.Conn)
}

// errBodyWait bounds the wait for an error answer's body: the status is the answer.
const errBodyWait = time.Second

// Bounds on the rest of a body read after its request is over, so that the connection can be reused.
const (
	drainLimit   = 64 << 10    // body bytes read
	drainTimeout = time.Second // a response that does not end by then is closed
)

// response reads one answer with net/http: an error status, a redirect, else the stream.
func (c *client) response(ctx context.Context, cancel context.CancelCauseFunc, resp *http.Response, rec *Record, conn net.Conn) {
	if resp.StatusCode != http.StatusOK {
		rec.end = c.since()
		t := time.AfterFunc(errBodyWait, func() { resp.Body.Close() })
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, int64(c.errBodyLen())))
		t.Stop()
		class, detail := c.httpFailure(resp.StatusCode, resp.Header.Get("Location"), msg)
		c.fail(rec, class, detail)
		return
	}
	if enc := resp.Header.Get("Content-Encoding"); !identity(enc) {
		c.fail(rec, errNotSSE, notSSEDetail(resp.Header.Get("Content-Type"), enc, nil))
		return
	}
	c.stream(ctx, cancel, resp.Body, rec, conn, resp.Header.Get("Content-Type"))
}

// httpFailure classifies a non-200 answer: a redirect names its target, any other status is
// http_<code> with the start of its body. Both readers use it, so they agree.
func (c *client) httpFailure(status int, location string, body []byte) (class, detail string) {
	if status >= 300 && status < 400 {
		return errRedirect, fmt.Sprintf("HTTP %d to %s: redirects are not followed (the API key would go with them); point --url at the server itself", status, cmp.Or(head([]byte(results.RedactURLs(location)), 200), "(no Location)"))
	}
	return fmt.Sprintf("http_%d", status), strings.TrimSpace(string(body))
}

// identity says whether a Content-Encoding leaves the body as sent (gpuvet asks for no compression).
func identity(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
}

// notSSEDetail says what came back instead of an event stream.
func notSSEDetail(ctype, enc string, start []byte) string {
	what := "a body with Content-Type " + cmp.Or(strings.TrimSpace(ctype), "(none)")
	if !identity(enc) {
		what += ", Content-Encoding " + enc + " (compressed: gpuvet asks for none)"
	}
	if len(start) > 0 {
		what += fmt.Sprintf(", starting %q", head(bytes.TrimSpace(start), 120))
	}
	return "HTTP 200 with " + what + ", not an event stream of completion chunks"
}

// errBodyLen reads 300 bytes of detail and the key's length, so an echoed key is redacted whole.
func (c *client) errBodyLen() int { return 300 + len(c.key) }

// connBox lets an atomic.Value hold connections of different concrete types.
type connBox struct{ net.Conn }

// chunkTime is when the chunk just read arrived: the kernel's receive time of the newest data read on
// conn when it lies between the request's send and now, else now. It adds the read lag to rec.
func (c *client) chunkTime(conn net.Conn, rec *Record, now time.Duration) time.Duration {
	kt, ok := netstamp.RXTime(conn)
	if !ok {
		return now
	}
	at := kt.Sub(c.epoch) // wall clock on both sides: the kernel stamps CLOCK_REALTIME
	if at > now || at < rec.sent {
		return now // a clock step, or data from before this request: trust the read time
	}
	rec.rxLag += now - at
	rec.rxN++
	return at
}

// stream reads the SSE body, marking each chunk with generated tokens (silence: silence.go).
func (c *client) stream(ctx context.Context, cancel context.CancelCauseFunc, body io.Reader, rec *Record, conn net.Conn, ctype string) {
	start := &headBytes{r: body}
	sse := newSSEReader(start)
	s := sseStream{c: c, rec: rec, ctype: ctype}
	// Whatever ends the stream, the tokens already received are counted (they were generated).
	defer s.finalize()
	for {
		data, err := sse.Next()
		now := c.since()
		if err != nil {
			if ctx.Err() != nil && !tooLong(err) {
				rec.end = now
				c.failCtx(ctx, rec, errCut, err)
				return
			}
			s.start = start.b
			s.broken(err, now)
			return
		}
		if s.event(data, c.chunkTime(conn, rec, now)) {
			return
		}
	}
}

// headBytes keeps the first bytes read through it: what a body that is no event stream began with.
type headBytes struct {
	r io.Reader
	b []byte
}

func (h *headBytes) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if k := min(n, 200-len(h.b)); k > 0 {
		h.b = append(h.b, p[:k]...)
	}
	return n, err
}

// sseStream turns one response's SSE events into its Record, the same for both readers.
type sseStream struct {
	c        *client
	rec      *Record
	lastCum  int // the server's cumulative completion count so far (continuous usage)
	tokens   int // tokens marked so far (continuous usage: deltas, bounded by max_tokens)
	final    *usage
	finished bool // a chunk carried a finish_reason
	events   int  // SSE events with data
	// ctype is the answer's Content-Type and start its first bytes (for a body that is no stream).
	ctype string
	start []byte
}

// event handles one event's data, received at now; true when the request is over.
func (s *sseStream) event(data []byte, now time.Duration) bool {
	rec := s.rec
	s.events++
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		rec.end = now
		s.complete()
		return true
	}
	ch, perr := parseChunk(data)
	if perr != nil {
		rec.end = now
		s.c.fail(rec, errMalformed, perr.Error())
		return true
	}
	if ch.Err != "" {
		rec.end = now
		s.c.fail(rec, errStream, ch.Err)
		return true
	}
	delta := 0
	if ch.HasUsage {
		u := ch.Usage
		s.final = &u
		if ch.HasChoices {
			// A count that goes back adds nothing; one past max_tokens is the defect reported below.
			cum := ch.Usage.CompletionTokens
			// Usage of zeros in every chunk is a placeholder (the count comes at the end).
			rec.contUsage = rec.contUsage || cum > 0
			delta = max(min(cum, tokenBound(rec))-s.tokens, 0)
			s.lastCum = max(s.lastCum, cum)
		}
	}
	if ch.Finish != "" {
		s.finished = true
	}
	if ch.ReasoningBytes > 0 && rec.firstReasoning == 0 {
		rec.firstReasoning = now
	}
	if ch.TextBytes > ch.ReasoningBytes && rec.firstOutput == 0 {
		rec.firstOutput = now // the first answer text, past any reasoning
	}
	if ch.TextBytes > 0 || delta > 0 {
		s.tokens += delta
		rec.marks = append(rec.marks, mark{at: now, tok: int32(delta), bytes: int32(min(ch.TextBytes, math.MaxInt32))})
		s.c.marked.Add(1)
		s.c.beat(rec, now)
	}
	if over := s.overMax(); over != "" {
		rec.end = now
		s.c.fail(rec, errOverMax, over)
		return true
	}
	return false
}

// overMax says how the stream went past max_tokens ("": it has not): more content chunks than tokens
// asked for, or a usage count above them; a server that ignores max_tokens may never stop. One chunk
// beyond is allowed: a detokeniser (vLLM's) flushes held-back text (a partial UTF-8 sequence) in a
// last chunk of no token of its own.
func (s *sseStream) overMax() string {
	rec := s.rec
	asked := rec.RequestedTokens
	switch {
	case asked <= 0:
		return ""
	case s.lastCum > asked:
		return fmt.Sprintf("usage.completion_tokens %d for max_tokens %d (%d chunks received): the server ignores max_tokens, or its usage is wrong", s.lastCum, asked, len(rec.marks))
	case len(rec.marks) > asked+1:
		return fmt.Sprintf("more than %d chunks with generated text for max_tokens %d: the server ignores max_tokens (or ignore_eos)", asked+1, asked)
	case s.final != nil && s.final.CompletionTokens > asked:
		return fmt.Sprintf("usage.completion_tokens %d for max_tokens %d (%d chunks received): the server ignores max_tokens, or its usage is wrong", s.final.CompletionTokens, asked, len(rec.marks))
	}
	return ""
}

// broken is the body ending (err: io.EOF when cleanly) before [DONE], at now: complete after a
// finish_reason, no stream at all without one SSE event, else cut.
func (s *sseStream) broken(err error, now time.Duration) {
	s.rec.end = now
	switch {
	case tooLong(err):
		s.c.fail(s.rec, errMalformed, err.Error())
	case err == io.EOF && s.finished:
		s.complete() // ended without [DONE] but after a finish_reason: complete
	case err == io.EOF && s.events == 0 && len(bytes.TrimSpace(s.start)) > 0:
		s.c.fail(s.rec, errNotSSE, notSSEDetail(s.ctype, "", s.start))
	default:
		s.c.fail(s.rec, errCut, fmt.Sprintf("stream ended before [DONE] after %d chunks: %v", len(s.rec.marks), err))
	}
	s.finalize()
}

// complete is a stream that ended as it should: its counts are final; a short or long one is an error.
func (s *sseStream) complete() {
	rec := s.rec
	if over := s.overMax(); over != "" {
		s.c.fail(rec, errOverMax, over)
	}
	rec.finalize(s.final)
	if rec.Error == "" && rec.OutputTokens < rec.RequestedTokens {
		s.c.fail(rec, errShort, fmt.Sprintf("asked for %d output tokens, got %d", rec.RequestedTokens, rec.OutputTokens))
	}
}

// finalize counts the tokens of a stream that ended any other way (they were generated).
func (s *sseStream) finalize() {
	if s.rec.Counts == "" {
		s.rec.finalize(s.final)
	}
}

func (c *client) since() time.Duration { return time.Since(c.epoch) }

// fail classifies rec. The detail is often the server's words: the API key is taken out of it first.
func (c *client) fail(rec *Record, class, detail string) {
	if rec.end == 0 {
		rec.end = c.since()
	}
	rec.Error, rec.Detail = class, head([]byte(oneLine(redact(detail, c.key))), 300)
}

// oneLine turns control characters into spaces, so a server's words cannot drive the terminal.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// Causes of a request's end that are the load's own (the request is then incomplete).
var (
	errDrained = errors.New("cut by the rung's drain bound")
	errSetup   = errors.New("the setup's bound (load.drain) ran out")
)

// failCtx classifies an error that may come from a context: our deadlines are timeouts, a judged silence
// its kind, the caller's cancellation incomplete (unless silent long enough to judge).
func (c *client) failCtx(ctx context.Context, rec *Record, class string, err error) {
	var quiet *silence
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &quiet):
		c.fail(rec, quiet.kind, quiet.detail)
	case errors.Is(cause, errReqDeadline):
		c.fail(rec, errTimeout, cause.Error())
	case ctx.Err() != nil:
		if rec.end == 0 {
			rec.end = c.since()
		}
		if q, _ := c.judge(rec, rec.end, true); q != nil {
			c.fail(rec, q.kind, q.detail)
			return
		}
		rec.Incomplete = true
		rec.Detail = c.incompleteReason(rec, cause)
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			class = errTimeout
		}
		c.fail(rec, class, err.Error())
	}
}
