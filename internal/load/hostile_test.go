package load

// Tests against hostile servers (issue 27): a raw net.Listener on loopback that answers completions
// however a broken engine or proxy might, through both readers. Whatever comes back, a load never
// panics, never outlasts its bounds, and ends every request it sent as ok, an error of a named kind,
// or incomplete with a reason.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// hostile serves /v1/models and /tokenize as an engine does, and hands every streamed completion to
// answer with its number (0-based, over the load; the negotiation's is 0) and max_tokens. answer writes
// raw bytes to the connection; returning false closes it.
type hostile struct {
	ln      net.Listener
	answer  func(c net.Conn, n, maxTokens int, req *http.Request) bool
	n       atomic.Int64
	mu      sync.Mutex
	conns   []net.Conn
	authSaw []string // Authorization headers of completion requests
}

func startHostile(t *testing.T, answer func(c net.Conn, n, maxTokens int, req *http.Request) bool) *hostile {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{ln: ln, answer: answer}
	go h.serve()
	t.Cleanup(h.close)
	return h
}

func (h *hostile) url() string { return "http://" + h.ln.Addr().String() }

func (h *hostile) close() {
	h.ln.Close()
	h.mu.Lock()
	for _, c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
}

func (h *hostile) serve() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
		go h.conn(c)
	}
}

func (h *hostile) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		var body struct {
			MaxTokens int       `json:"max_tokens"`
			Stream    bool      `json:"stream"`
			Prompt    string    `json:"prompt"`
			Messages  []message `json:"messages"`
		}
		json.NewDecoder(req.Body).Decode(&body)
		req.Body.Close()
		switch {
		case req.URL.Path == "/v1/models":
			writeJSON(c, 200, fmt.Sprintf(`{"data":[{"id":%q}]}`, testModel))
		case req.URL.Path == "/tokenize":
			n := len(strings.Fields(body.Prompt))
			for _, m := range body.Messages {
				n += len(strings.Fields(m.Content))
			}
			writeJSON(c, 200, fmt.Sprintf(`{"count":%d}`, n))
		case !body.Stream:
			writeJSON(c, 200, `{"choices":[{"text":"x"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
		default:
			h.mu.Lock()
			h.authSaw = append(h.authSaw, req.Header.Get("Authorization"))
			h.mu.Unlock()
			if !h.answer(c, int(h.n.Add(1)-1), body.MaxTokens, req) {
				return
			}
		}
	}
}

func writeJSON(c net.Conn, status int, body string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
}

// sseHead starts a chunked event stream; writeEvent writes one SSE event as one HTTP chunk.
const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func writeEvent(c net.Conn, data string) error {
	ev := "data: " + data + "\n\n"
	_, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(ev), ev)
	return err
}

func tokenChunk(usage string) string {
	return `{"choices":[{"index":0,"text":"tok ","finish_reason":null}]` + usage + `}`
}

// answerStream answers n tokens gap apart, with finalUsage as the closing usage count (<0: none).
func answerStream(c net.Conn, n int, gap time.Duration, finalUsage int) bool {
	c.Write([]byte(sseHead))
	for range n {
		time.Sleep(gap)
		if writeEvent(c, tokenChunk("")) != nil {
			return false
		}
	}
	if finalUsage >= 0 {
		writeEvent(c, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}`, finalUsage))
	}
	writeEvent(c, "[DONE]")
	_, err := c.Write([]byte("0\r\n\r\n"))
	return err == nil
}

// hostileOpts is a completions load of requests asking for out tokens each.
func hostileOpts(url, reader string, out int, c results.LoadConfig) Options {
	c.API, c.Reader, c.OutputTokens, c.PromptTokens = "completions", reader, out, 8
	if c.Warmup == "" {
		c.Warmup = "0"
	}
	return Options{URL: url, Model: testModel, Config: c, Drain: 5 * time.Second}
}

var readers = []string{ReaderEventLoop, ReaderNetHTTP}

// everyRequestAccounted: each record is ok, an error of a named kind, or incomplete with a reason.
func everyRequestAccounted(t *testing.T, recs []Record) {
	t.Helper()
	for _, r := range recs {
		switch {
		case r.Incomplete && r.Detail == "":
			t.Errorf("request %d incomplete without a reason", r.Index)
		case !r.Incomplete && r.Error == "" && r.OutputTokens == 0:
			t.Errorf("request %d neither ok, nor an error, nor incomplete: %+v", r.Index, r)
		}
	}
}

// Issue 27, item 1: the server's usage counts are claims. 999,999,999,999,999 completion tokens once
// panicked bench (makeslice); 3e9 in continuous usage allocated gigabytes per request. They are
// bounded by max_tokens, the disagreement is kept, and the server's overrun is an API defect.
func TestHostileUsageCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		usage func(k int) string // the usage of content chunk k (1-based), and of the closing chunk (k 0)
	}{
		{"final usage 999999999999999", func(k int) string {
			if k == 0 {
				return `,"usage":{"prompt_tokens":3,"completion_tokens":999999999999999}`
			}
			return ""
		}},
		{"continuous usage 3e9", func(k int) string {
			return fmt.Sprintf(`,"usage":{"prompt_tokens":3,"completion_tokens":%d}`, 3_000_000_000+k)
		}},
	} {
		for _, reader := range readers {
			t.Run(tc.name+"/"+reader, func(t *testing.T) {
				h := startHostile(t, func(c net.Conn, _, maxTokens int, _ *http.Request) bool {
					c.Write([]byte(sseHead))
					for k := 1; k <= maxTokens; k++ {
						writeEvent(c, tokenChunk(tc.usage(k)))
					}
					writeEvent(c, `{"choices":[]`+tc.usage(0)+`}`)
					writeEvent(c, "[DONE]")
					c.Write([]byte("0\r\n\r\n"))
					return true
				})
				o := hostileOpts(h.url(), reader, 4, results.LoadConfig{Profile: "concurrency", Concurrency: 2, MaxRequests: 6})
				o.RecordsPath = t.TempDir() + "/r.jsonl"
				l, _ := Run(context.Background(), o)
				if l == nil || len(l.Runs) != 1 {
					t.Fatalf("no load measured: %+v", l)
				}
				r := l.Runs[0]
				if r.Errors[errOverMax] != r.Requests.Errored || r.Requests.Errored < 6 || r.Requests.Successful != 0 {
					t.Fatalf("errors %v, requests %+v: want every request %s", r.Errors, r.Requests, errOverMax)
				}
				recs := readRecordsT(t, o.RecordsPath)
				everyRequestAccounted(t, recs)
				for _, rec := range recs {
					if rec.OutputTokens > 4 || !strings.Contains(rec.Detail, "max_tokens 4") {
						t.Fatalf("record %+v: want at most the 4 tokens asked for, and the claim named", rec)
					}
				}
				if tc.name[0] == 'f' && recs[0].UsageClaim != 999999999999999 {
					t.Fatalf("the disbelieved claim is not kept: %+v", recs[0])
				}
			})
		}
	}
}

// Issue 27, item 3: a server that ignores max_tokens (40 chunks for 4 asked, no usage) or never
// stops is an API defect, and the endless stream is ended at once, not at the drain.
func TestHostileOverMaxTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	for _, endless := range []bool{false, true} {
		for _, reader := range readers {
			t.Run(fmt.Sprintf("endless=%v/%s", endless, reader), func(t *testing.T) {
				h := startHostile(t, func(c net.Conn, _, maxTokens int, _ *http.Request) bool {
					c.Write([]byte(sseHead))
					for k := 0; endless || k < 10*maxTokens; k++ {
						if writeEvent(c, tokenChunk("")) != nil {
							return false
						}
						time.Sleep(time.Millisecond)
					}
					writeEvent(c, "[DONE]")
					c.Write([]byte("0\r\n\r\n"))
					return true
				})
				o := hostileOpts(h.url(), reader, 4, results.LoadConfig{Profile: "synchronous", MaxRequests: 3})
				o.Drain = time.Minute
				start := time.Now()
				l, _ := Run(context.Background(), o)
				if l == nil {
					t.Fatal("no load")
				}
				r := l.Runs[0]
				if r.Errors[errOverMax] != 3 || r.Requests.Successful != 0 || r.Requests.Incomplete != 0 {
					t.Fatalf("errors %v requests %+v: want 3 × %s", r.Errors, r.Requests, errOverMax)
				}
				if d := time.Since(start); d > 30*time.Second {
					t.Fatalf("took %v: the endless streams were not ended", d)
				}
			})
		}
	}
}

// Issue 27, item 2: a server that never answers one request in five and stalls another mid-stream.
// Those requests were cancelled by the drain as incomplete, which no gate reads: now they are
// no_answer and stalled errors, judged by the load's own TTFTs and gaps (not a fixed timeout), and
// the rest stream on.
func TestHostileSilences(t *testing.T) {
	t.Parallel() // waits on silences and stalls, not the CPU
	for _, reader := range readers {
		t.Run(reader, func(t *testing.T) {
			h := startHostile(t, func(c net.Conn, n, maxTokens int, _ *http.Request) bool {
				switch {
				case n > 0 && n%5 == 2: // never answers
					time.Sleep(time.Minute)
					return false
				case n > 0 && n%5 == 4: // stalls after 3 tokens
					c.Write([]byte(sseHead))
					for range 3 {
						writeEvent(c, tokenChunk(""))
						time.Sleep(5 * time.Millisecond)
					}
					time.Sleep(time.Minute)
					return false
				}
				return answerStream(c, maxTokens, 5*time.Millisecond, maxTokens)
			})
			o := hostileOpts(h.url(), reader, 8, results.LoadConfig{Profile: "concurrency", Concurrency: 4, MaxDuration: results.Duration(2 * time.Second)})
			o.SilenceFloor = 500 * time.Millisecond
			o.Drain = 5 * time.Second
			o.RecordsPath = t.TempDir() + "/r.jsonl"
			start := time.Now()
			l, _ := Run(context.Background(), o)
			took := time.Since(start)
			r := l.Runs[0]
			if r.Errors[errNoAnswer] == 0 || r.Errors[errStalled] == 0 || r.Requests.Successful == 0 {
				t.Fatalf("errors %v requests %+v: want no_answer and stalled errors beside successes", r.Errors, r.Requests)
			}
			recs := readRecordsT(t, o.RecordsPath)
			everyRequestAccounted(t, recs)
			if sent := int(h.n.Load()) - 1; len(recs) != sent { // the negotiation's request is no record
				t.Fatalf("%d records for %d requests sent", len(recs), sent)
			}
			// A hung request that no answered request started after (the last ones sent) has no
			// evidence against it: the drain leaves it incomplete, with its reason (checked above).
			if r.Requests.Incomplete > 1 || r.Requests.Incomplete > r.Errors[errNoAnswer] {
				t.Fatalf("requests %+v errors %v: hung requests left incomplete", r.Requests, r.Errors)
			}
			// The duration and the drain bound it (the last hung requests, never overtaken by an
			// answered one inside the rung, are judged when the drain ends), well short of the
			// silences' minute; the slack is the set-up's on a busy machine (10.5-19 s at load 12-26).
			if took > 2*time.Second+o.Drain+15*time.Second {
				t.Fatalf("took %v", took)
			}
		})
	}
}

// Issue 27, item 2: a slow stream that keeps streaming is not stalled. 300 ms between tokens (a
// real engine at c=128 streams about that) against a silence floor of 100 ms: the limit follows the
// gaps and TTFTs the load has seen, so nothing is cut.
func TestHostileSlowStreamIsNotStalled(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	for _, reader := range readers {
		t.Run(reader, func(t *testing.T) {
			h := startHostile(t, func(c net.Conn, _, maxTokens int, _ *http.Request) bool {
				time.Sleep(500 * time.Millisecond) // the first gap's limit is 2× the TTFT: 1 s
				return answerStream(c, maxTokens, 300*time.Millisecond, maxTokens)
			})
			o := hostileOpts(h.url(), reader, 6, results.LoadConfig{Profile: "concurrency", Concurrency: 2, MaxRequests: 4})
			o.SilenceFloor = 100 * time.Millisecond
			l, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if r := l.Runs[0]; r.Requests.Successful != 4 || len(r.Errors) != 0 {
				t.Fatalf("errors %v requests %+v: a slow stream was cut", r.Errors, r.Requests)
			}
		})
	}
}

// Issue 27, item 4: a server that accepts and never answers. The setup (calibration, negotiation)
// is bounded by the drain, not by the 10-minute request timeout.
func TestHostileNeverAnswersBoundsTheSetup(t *testing.T) {
	t.Parallel() // waits on silences and stalls, not the CPU
	h := startHostile(t, func(net.Conn, int, int, *http.Request) bool {
		time.Sleep(time.Minute)
		return false
	})
	o := hostileOpts(h.url(), ReaderAuto, 4, results.LoadConfig{Profile: "concurrency", Concurrency: 2, MaxDuration: results.Duration(time.Second)})
	o.Drain = 2 * time.Second
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := Run(context.Background(), o)
		done <- err
	}()
	select {
	case err := <-done:
		// Issue 51: it says what happened (no token in how long, how many tries), not "ran out 0 ms
		// after it was sent", and marks itself as the setup's (bench exits 2: nothing measured).
		// How long it waited is measured from the request's send, a little under the 2 s bound from
		// the setup's start ("in 1.9s" once in CI, "in 1.4s" on a loaded 2-core machine, where the
		// prompt calibration before it took 0.6 s; "in 100ms" under the race detector): any figure is
		// fine, a 0 ms one is not.
		if !errors.Is(err, ErrNotServing) || !regexp.MustCompile(`sent no token of the first streamed request in ([1-9]\d*ms|0\.\ds|[12](\.\d)?s)`).MatchString(err.Error()) ||
			!strings.Contains(err.Error(), "3 tries") || time.Since(start) > 10*time.Second {
			t.Fatalf("after %v: %v", time.Since(start), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still negotiating after 30 s with a 2 s drain bound")
	}
}

// Issue 27, item 5: a server that echoes the API key in its errors (an error body, an in-stream
// error, a malformed chunk cut in the middle of the key) leaves it nowhere: not in the records, the
// result, or the error. Issue 27, item 6: a redirect is an error naming its target in both readers,
// and the target never sees the key (nor any request).
func TestHostileKeyAndRedirect(t *testing.T) {
	const key = "sk-hostile-0123456789abcdef"
	t.Setenv("GPUVET_HOSTILE_KEY", key)
	target := startHostile(t, func(c net.Conn, _, maxTokens int, _ *http.Request) bool {
		return answerStream(c, maxTokens, 0, maxTokens)
	})
	for _, reader := range readers {
		t.Run(reader, func(t *testing.T) {
			h := startHostile(t, func(c net.Conn, n, maxTokens int, req *http.Request) bool {
				auth := req.Header.Get("Authorization")
				switch n % 5 {
				case 1:
					writeJSON(c, 401, fmt.Sprintf(`{"error":{"message":"bad key %s"}}`, auth))
				case 2:
					c.Write([]byte(sseHead))
					writeEvent(c, fmt.Sprintf(`{"error":{"message":"rejected %s"}}`, auth))
					c.Write([]byte("0\r\n\r\n"))
				case 3:
					c.Write([]byte(sseHead))
					writeEvent(c, fmt.Sprintf(`{"choices":[{"text":"%s`, strings.Repeat("x", 60)+auth))
					c.Write([]byte("0\r\n\r\n"))
				case 4:
					fmt.Fprintf(c, "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s/v1/completions?k=%s\r\nContent-Length: 0\r\n\r\n", target.url(), strings.TrimPrefix(auth, "Bearer "))
				default:
					return answerStream(c, maxTokens, 0, maxTokens)
				}
				return true
			})
			o := hostileOpts(h.url(), reader, 4, results.LoadConfig{Profile: "synchronous", MaxRequests: 10})
			o.APIKeyEnv = "GPUVET_HOSTILE_KEY"
			o.RecordsPath = t.TempDir() + "/r.jsonl"
			l, err := Run(context.Background(), o)
			if l == nil {
				t.Fatal(err)
			}
			r := l.Runs[0]
			for _, kind := range []string{"http_401", errStream, errMalformed, errRedirect} {
				if r.Errors[kind] == 0 {
					t.Errorf("no %s (errors %v)", kind, r.Errors)
				}
			}
			js, _ := json.Marshal(l)
			raw, _ := os.ReadFile(o.RecordsPath)
			for what, b := range map[string][]byte{"result": js, "records": raw, "error": []byte(fmt.Sprint(err))} {
				if bytes.Contains(b, []byte(key[:8])) {
					t.Errorf("the key is in the %s: %s", what, b)
				}
			}
			if !bytes.Contains(raw, []byte(target.url())) {
				t.Errorf("no redirect names its target %s: %s", target.url(), raw)
			}
			if n := target.n.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests (with %v)", n, target.authSaw)
			}
		})
	}
}

// Issue 27, item 6: an HTML page, a gzip body or a JSON answer where a stream was asked for is said
// for what it is (not cut_stream), and a 500 whose body trickles is http_500 at once, not incomplete.
func TestHostileBodies(t *testing.T) {
	t.Parallel() // waits on silences and stalls, not the CPU
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("data: " + tokenChunk("") + "\n\ndata: [DONE]\n\n"))
	zw.Close()
	for _, tc := range []struct {
		name, want, detail string
		answer             func(c net.Conn)
	}{
		{"html", errNotSSE, "text/html", func(c net.Conn) {
			body := "<html><body><h1>502 Bad Gateway</h1></body></html>\n"
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}},
		{"gzip", errNotSSE, "gzip", func(c net.Conn) {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", gz.Len(), gz.Bytes())
		}},
		{"json", errNotSSE, "application/json", func(c net.Conn) {
			body := `{"choices":[{"text":"tok tok tok tok"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}},
		{"endless event", errMalformed, "SSE event longer than 4 MiB", func(c net.Conn) {
			// Data lines of one event that never meet its blank line: 16 MiB of them, then the end.
			c.Write([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"))
			piece := strings.Repeat("data: "+strings.Repeat("x", 1000)+"\n", 64)
			for range 16 << 20 / len(piece) {
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(piece), piece); err != nil {
					return
				}
			}
			c.Write([]byte("0\r\n\r\n"))
		}},
		{"trickling 500", "http_500", "upstream", func(c net.Conn) {
			c.Write([]byte("HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\nupstream "))
			for range 300 {
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}},
	} {
		for _, reader := range readers {
			t.Run(tc.name+"/"+reader, func(t *testing.T) {
				h := startHostile(t, func(c net.Conn, n, maxTokens int, _ *http.Request) bool {
					if n == 0 {
						return answerStream(c, maxTokens, 0, maxTokens) // the negotiation
					}
					tc.answer(c) // each says Connection: close, as it closes
					return false
				})
				o := hostileOpts(h.url(), reader, 4, results.LoadConfig{Profile: "synchronous", MaxRequests: 2})
				o.RecordsPath = t.TempDir() + "/r.jsonl"
				start := time.Now()
				l, _ := Run(context.Background(), o)
				if l == nil {
					t.Fatal("no load")
				}
				r := l.Runs[0]
				if r.Errors[tc.want] != 2 {
					t.Fatalf("errors %v requests %+v: want 2 × %s", r.Errors, r.Requests, tc.want)
				}
				for _, rec := range readRecordsT(t, o.RecordsPath) {
					if !strings.Contains(rec.Detail, tc.detail) {
						t.Fatalf("detail %q does not say %q", rec.Detail, tc.detail)
					}
				}
				if d := time.Since(start); d > 15*time.Second {
					t.Fatalf("took %v", d)
				}
			})
		}
	}
}

// Issue 27, item 2, through the simulator (`gpuvet sim --fault-stall 0.2 --fault-stall-for 60s`):
// the streams it stalls are stalled errors within the rung, judged by the load's own gaps (the
// stall timeout, 120 s, is far off), and none is left to the drain as incomplete.
func TestSimStallsAreStalledErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	for _, reader := range readers {
		t.Run(reader, func(t *testing.T) {
			srv, err := sim.Listen(sim.Config{Model: testModel, TTFT: 5 * time.Millisecond, ITL: 2 * time.Millisecond,
				Faults: sim.Faults{StallRate: 0.2, Stall: time.Minute}, Seed: 3}, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			o := opts(srv.URL(), results.LoadConfig{Profile: "concurrency", Concurrency: 4, MaxDuration: results.Duration(2 * time.Second), Reader: reader})
			o.SilenceFloor = 500 * time.Millisecond
			o.Drain = 6 * time.Second // the setup's bound too: a stalled negotiation is sent again within it
			start := time.Now()
			l, err := Run(context.Background(), o)
			if l == nil {
				t.Fatal(err)
			}
			r := l.Runs[0]
			if r.Errors[errStalled] == 0 || r.Requests.Incomplete != 0 || r.Requests.Successful == 0 {
				t.Fatalf("errors %v requests %+v: want the stalled streams as %s errors, none incomplete", r.Errors, r.Requests, errStalled)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("took %v: the stalls waited for the drain", d)
			}
		})
	}
}

// Issue 27, item 2: requests queued behind others are not unanswered. An engine that serves two
// streams at a time (in order) keeps the rest waiting for seconds, hundreds of TTFTs: none is
// no_answer, since none was overtaken by a later request.
func TestQueuedRequestsAreNotUnanswered(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	for _, reader := range readers {
		t.Run(reader, func(t *testing.T) {
			f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 40 * time.Millisecond, usage: "continuous", capacity: make(chan struct{}, 2)}
			s := f.start(t)
			o := opts(s.URL, results.LoadConfig{Profile: "concurrency", Concurrency: 6, MaxRequests: 12, Warmup: "0", Reader: reader})
			o.SilenceFloor = 200 * time.Millisecond
			l, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if r := l.Runs[0]; r.Requests.Successful != 12 || len(r.Errors) != 0 {
				t.Fatalf("errors %v requests %+v: queued requests were judged unanswered", r.Errors, r.Requests)
			}
		})
	}
}

// TestHostileHeldOpenAfterDone: a server that sends [DONE] (or an error event) and then holds the
// response open, never ending its chunked body, costs each request at most a second after its end,
// with either reader: the net/http reader drained the rest of the body for reuse with nothing to
// bound it but the silence watchdog (10 s here), so a closed-loop slot sent its next request 10 s
// late and the rung's request rate read a fraction of the server's.
func TestHostileHeldOpenAfterDone(t *testing.T) {
	t.Parallel() // waits on the held-open responses, not the CPU
	for _, reader := range readers {
		t.Run(reader, func(t *testing.T) {
			h := startHostile(t, func(c net.Conn, n, maxTokens int, _ *http.Request) bool {
				if n == 0 {
					return answerStream(c, maxTokens, 0, maxTokens) // the negotiation
				}
				c.Write([]byte(sseHead))
				for range maxTokens {
					writeEvent(c, tokenChunk(""))
				}
				if n%2 == 0 {
					writeEvent(c, `{"error":{"message":"boom"}}`)
				}
				writeEvent(c, "[DONE]")
				time.Sleep(30 * time.Second) // no last chunk: the body never ends
				return false
			})
			o := hostileOpts(h.url(), reader, 4, results.LoadConfig{Profile: "synchronous", MaxRequests: 4})
			start := time.Now()
			l, err := Run(context.Background(), o)
			if l == nil {
				t.Fatal(err)
			}
			r := l.Runs[0]
			if r.Requests.Successful+r.Requests.Errored != 4 {
				t.Fatalf("requests %+v errors %v", r.Requests, r.Errors)
			}
			if d := time.Since(start); d > 12*time.Second {
				t.Fatalf("4 requests took %v", d)
			}
		})
	}
}
