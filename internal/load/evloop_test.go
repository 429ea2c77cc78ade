//go:build linux

package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/netstamp"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// classified is what a record says about its request, whichever reader read it.
type classified struct {
	Index                     int
	Warmup, Incomplete, NewCx bool
	Error, Detail, Counts     string
	Output, Requested, Prompt int
	Chunks                    int
}

func classify(r Record) classified {
	d := r.Detail
	if r.Error == errCut || r.Error == errTimeout {
		// The transport's own words differ ("read tcp 127.0.0.1:…: connection reset" against "read:
		// connection reset"); what the request got before it was cut must not.
		d, _, _ = strings.Cut(d, ":")
	}
	d, _, _ = strings.Cut(d, " (starts") // a malformed chunk's start holds its creation time
	if r.Error == errStalled || r.Error == errNoAnswer {
		// The silence and the gaps as measured differ; how far the stream got must not.
		_, after, _ := strings.Cut(d, " after ")
		d, _, _ = strings.Cut(after, " (")
	}
	return classified{Index: r.Index, Warmup: r.Warmup, Incomplete: r.Incomplete, NewCx: r.NewConnection,
		Error: r.Error, Detail: d, Counts: r.Counts, Output: r.OutputTokens, Requested: r.RequestedTokens,
		Prompt: r.PromptTokens, Chunks: r.Chunks}
}

// simRecords runs one load through reader against a fresh simulator with faults and returns its
// records by prompt index and the result.
func simRecords(t *testing.T, reader, api string, faults sim.Faults) (map[int]classified, *results.Load) {
	t.Helper()
	srv, err := sim.Listen(sim.Config{Model: testModel, TTFT: 5 * time.Millisecond, ITL: time.Millisecond, Faults: faults, Seed: 7}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "records.jsonl")
	// One stream: the simulator draws each request's faults in arrival order, so both readers
	// must see the same order to meet the same faults.
	o := opts(srv.URL(), results.LoadConfig{Profile: "concurrency", Concurrency: 1, MaxRequests: 60, OutputTokens: 16, API: api, Reader: reader})
	o.RecordsPath = path
	o.StallTimeout = 300 * time.Millisecond
	l, err := Run(context.Background(), o)
	if l == nil {
		t.Fatalf("%s: %v", reader, err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[int]classified{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got[r.Index] = classify(r)
	}
	return got, l
}

// TestReadersAgreeOnSim is the event-loop reader's differential test: the same load against the same
// fault-injecting simulator gives the same classified records through both readers.
func TestReadersAgreeOnSim(t *testing.T) {
	t.Parallel() // waits on silences and stalls, not the CPU
	faults := sim.Faults{Rate5xx: 0.08, Rate429: 0.08, CutRate: 0.1, MalformedRate: 0.1, StallRate: 0.08, Stall: time.Second}
	for _, api := range []string{"completions", "chat"} {
		t.Run(api, func(t *testing.T) {
			ev, evLoad := simRecords(t, ReaderEventLoop, api, faults)
			nh, nhLoad := simRecords(t, ReaderNetHTTP, api, faults)
			if !strings.HasPrefix(evLoad.Client.Reader, "event loop") || !strings.HasPrefix(nhLoad.Client.Reader, "net/http") {
				t.Fatalf("readers %q and %q", evLoad.Client.Reader, nhLoad.Client.Reader)
			}
			if len(ev) != len(nh) || len(ev) < 61 {
				t.Fatalf("%d records through the event loop, %d through net/http, want 61 each", len(ev), len(nh))
			}
			classes := map[string]int{}
			for i, want := range nh {
				if got := ev[i]; got != want {
					t.Errorf("request %d:\nevent loop %+v\nnet/http   %+v", i, got, want)
				}
				classes[want.Error]++
			}
			// The faults must have hit: a differential test of clean streams only proves little.
			for _, c := range []string{"", "http_500", "http_429", errCut, errMalformed, errStalled} {
				if classes[c] == 0 {
					t.Errorf("no request classed %q (classes %v): change the seed or rates", c, classes)
				}
			}
			t.Logf("classes %v", classes)
			if t.Failed() {
				for i := range len(nh) {
					t.Logf("%d\n ev %+v\n nh %+v", i, ev[i], nh[i])
				}
			}
			if fmt.Sprint(evLoad.Runs[0].Errors) != fmt.Sprint(nhLoad.Runs[0].Errors) {
				t.Errorf("run errors: event loop %v, net/http %v", evLoad.Runs[0].Errors, nhLoad.Runs[0].Errors)
			}
			// Each class of error keeps its first requests as evidence, each one a request of that class.
			run := evLoad.Runs[0]
			for class, n := range run.Errors {
				k := 0
				for _, e := range run.ErrorSamples {
					if e.Class != class {
						continue
					}
					k++
					if ev[e.Index].Error != class || e.RequestedTokens == 0 {
						t.Errorf("sample %+v: its request is classed %q", e, ev[e.Index].Error)
					}
				}
				if k != min(n, results.MaxErrorSamples) {
					t.Errorf("%d samples of %s (%d errors), want %d", k, class, n, min(n, results.MaxErrorSamples))
				}
			}
		})
	}
}

// TestNetHTTPReader runs the scenario tests, which use the event loop by default, with net/http too.
func TestNetHTTPReader(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	defer func(r string) { testReader = r }(testReader)
	testReader = ReaderNetHTTP
	for name, test := range map[string]func(*testing.T){
		"errors": TestErrorsAreClassifiedNotFatal, "connect": TestConnectError, "stall": TestStallTimeoutIsTheCeiling,
		"refusing": TestServerRefusingIsNotClientLag, "interrupt": TestInterruptKeepsMeasurements,
		"apikey": TestAPIKeyFromEnvOnly, "synchronous": TestSynchronousMeasuresTTFTAndITL, "strict": TestStrictEndpointGetsPlainRequests,
	} {
		t.Run(name, test)
	}
}

// TestReaderChoice: auto takes the event loop for plain http only; an explicit eventloop where it
// cannot run is an error before any load.
func TestReaderChoice(t *testing.T) {
	for _, c := range []struct {
		setting, url string
		loop, err    bool
	}{
		{ReaderAuto, "http://127.0.0.1:8000/v1/completions", true, false},
		{ReaderAuto, "https://example.com/v1/completions", false, false},
		{ReaderAuto, "http://user:pw@127.0.0.1:8000/v1/completions", false, false},
		{ReaderNetHTTP, "http://127.0.0.1:8000/v1/completions", false, false},
		{ReaderEventLoop, "http://127.0.0.1:8000/v1/completions", true, false},
		{ReaderEventLoop, "https://example.com/v1/completions", false, true},
	} {
		ep, loop, why, err := pickReader(c.setting, c.url)
		if loop != c.loop || (err != nil) != c.err || (!loop && !c.err && why == "") {
			t.Errorf("%s %s: loop %v why %q err %v", c.setting, c.url, loop, why, err)
		}
		if loop && (ep.addr != "127.0.0.1:8000" || ep.uri != "/v1/completions" || ep.host != "127.0.0.1:8000") {
			t.Errorf("%s: endpoint %+v", c.url, ep)
		}
	}
	defer func(f func(*http.Request) (*url.URL, error)) { proxyFor = f }(proxyFor)
	proxyFor = func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.example:3128") }
	if _, loop, why, _ := pickReader(ReaderAuto, "http://10.1.2.3:8000/v1/completions"); loop || !strings.Contains(why, "proxy") {
		t.Errorf("with a proxy: loop %v (%q)", loop, why)
	}
	if err := Validate(Options{URL: "http://127.0.0.1:1", Model: "m", Config: results.LoadConfig{Reader: "epoll"}}); err == nil || !strings.Contains(err.Error(), "--reader") {
		t.Errorf("a bad reader: %v", err)
	}
}

// TestEventLoopLargeRequestAndReuse: a request far larger than the socket's send buffer is written in
// pieces by the loop (the server reads it slowly), and answered streams reuse their connection.
func TestEventLoopLargeRequestAndReuse(t *testing.T) {
	var got []int
	var mu sync.Mutex
	var conns sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conns.Store(r.RemoteAddr, true)
		n := 0
		buf := make([]byte, 64<<10)
		for {
			k, err := r.Body.Read(buf)
			n += k
			if err != nil {
				break
			}
			time.Sleep(time.Millisecond) // slower than the client writes: its send buffer fills
		}
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d}}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := &client{endpoint: srv.URL + "/v1/completions", model: "m", reqTimeout: time.Minute, stall: time.Minute, epoch: time.Now(), rx: &rxStatus{}}
	ep, ok, why, err := pickReader(ReaderEventLoop, c.endpoint)
	if !ok || err != nil {
		t.Fatalf("no event loop: %s %v", why, err)
	}
	if c.ev, err = newEvReader(c, ep, 1); err != nil {
		t.Fatal(err)
	}
	defer c.ev.close()
	big := strings.Repeat("token ", 1<<20) // a 6 MiB prompt
	for i := range 3 {
		rec := &Record{}
		c.do(context.Background(), dataset.Prompt{Text: big}, 3, rec)
		if rec.Error != "" || rec.OutputTokens != 3 || rec.Counts != countsContinuous || rec.sent <= rec.start {
			t.Fatalf("request %d: %s %s, %d tokens (%s), sent %v", i, rec.Error, rec.Detail, rec.OutputTokens, rec.Counts, rec.sent)
		}
		if rec.NewConnection != (i == 0) {
			t.Fatalf("request %d: new connection %v", i, rec.NewConnection)
		}
	}
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	mu.Lock() // the handler appended it; the network is no happens-before to the race detector
	defer mu.Unlock()
	if len(got) != 3 || got[0] < len(big) || n != 1 {
		t.Fatalf("server read %v bytes over %d connections", got, n)
	}
}

// readWithNetHTTP classifies a response the way the net/http reader does (doHTTP after the round trip),
// the end of in being the server closing the connection.
func readWithNetHTTP(c *client, in []byte) *Record {
	rec := &Record{RequestedTokens: 4, marks: make([]mark, 0, 4)}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), &http.Request{Method: http.MethodPost})
	if err != nil {
		c.fail(rec, errCut, err.Error())
		return rec
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	c.response(ctx, cancel, resp, rec, nil)
	return rec
}

// readWithEventLoop feeds in to an event loop's connection in the pieces cuts draws (spacing what each
// read carried, as the loop does), then closes it.
func readWithEventLoop(c *client, in, cuts []byte) *Record {
	rec := &Record{RequestedTokens: 4, marks: make([]mark, 0, 4)}
	l := &evLoop{r: &evReader{c: c}, epfd: -1, conns: map[int32]*evConn{}, sched: newPollSchedule()}
	cn := &evConn{fd: -1, loop: l}
	q := &evReq{conn: cn, s: sseStream{c: c, rec: rec}, done: make(chan struct{}), cancel: func(error) {}}
	cn.req = q
	l.conns[-1] = cn
	for k := 0; len(in) > 0 && !q.released; k++ {
		n := len(in)
		if len(cuts) > 0 {
			n = min(n, int(cuts[k%len(cuts)])+1)
		}
		l.consume(cn, in[:n], c.since(), c.since(), false, 0)
		in = in[n:]
	}
	if !q.released {
		l.eof(cn, c.since())
	}
	return rec
}

// FuzzReadersAgreeOnResponses: whatever a server sends in a response body (any SSE, cut anywhere,
// framed chunked, by length or until close, or an error status), and however it arrives in reads, the
// event loop classifies the request as the net/http reader does.
func FuzzReadersAgreeOnResponses(f *testing.F) {
	ev := func(s ...string) []byte {
		var b []byte
		for _, e := range s {
			b = append(b, "data: "+e+"\n\n"...)
		}
		return b
	}
	tok := func(n int) string {
		return fmt.Sprintf(`{"choices":[{"text":"ab","finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":%d}}`, n)
	}
	full := ev(tok(1), tok(2), tok(3), tok(4), "[DONE]")
	for frame := range byte(4) {
		f.Add(frame, full, []byte{7})
		f.Add(frame|4, full[:len(full)/2], []byte{3, 60})
		f.Add(frame, ev(tok(1), `{"choices":[{"text":"x"`, tok(2)), []byte{255})
		f.Add(frame, ev(tok(1), `{"error":{"message":"boom"}}`), []byte{1})
		f.Add(frame, ev(`{"choices":[{"text":"ab","finish_reason":"length"}]}`, `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`), []byte{9})
	}
	f.Fuzz(func(t *testing.T, frame byte, body, cuts []byte) {
		c := &client{stall: time.Hour, epoch: time.Now()}
		var in []byte
		switch frame & 3 {
		case 0: // chunked, one HTTP chunk per 40 bytes; bit 4: no last chunk (cut)
			in = []byte(chunkedHead)
			for b := body; len(b) > 0; {
				k := min(len(b), 40)
				in = fmt.Appendf(in, "%x\r\n%s\r\n", k, b[:k])
				b = b[k:]
			}
			if frame&4 == 0 {
				in = append(in, "0\r\n\r\n"...)
			}
		case 1: // Content-Length; bit 4: the server promised 5 bytes more than it sent
			extra := 0
			if frame&4 != 0 {
				extra = 5
			}
			in = fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body)+extra, body)
		case 2: // a body that ends when the server closes
			in = append([]byte("HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"), body...)
		case 3:
			in = fmt.Appendf(nil, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
		want, got := classify(*readWithNetHTTP(c, in)), classify(*readWithEventLoop(c, in, cuts))
		if want.Error == errCut && !strings.HasPrefix(want.Detail, "stream ended") {
			want.Detail, got.Detail = "", "" // a transport's own words
		}
		if got != want {
			t.Fatalf("frame %d:\nnet/http   %+v\nevent loop %+v", frame, want, got)
		}
	})
}

// TestEventLoopSpacesALateRead: a stream's three tokens 4 ms apart reach the socket while the loop is
// away, and one read returns them all. Its kernel time is the newest token's; the two before are spaced
// over the span since the socket was last drained, so no gap reads zero and the gaps keep their sum.
func TestEventLoopSpacesALateRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := &client{endpoint: "http://" + ln.Addr().String() + "/v1/completions", reqTimeout: time.Minute, stall: time.Minute, epoch: time.Now(), rx: &rxStatus{}}
	r := &evReader{c: c, addr: ln.Addr().String()}
	l := &evLoop{r: r, epfd: -1, conns: map[int32]*evConn{}, buf: make([]byte, 64<<10), oob: make([]byte, netstamp.OOBSize), sched: newPollSchedule()}
	r.loops = []*evLoop{l}
	cn, err := r.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cn.fd)
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rec := &Record{marks: make([]mark, 0, 8)}
	rec.sent = c.since()
	cn.req = &evReq{conn: cn, s: sseStream{c: c, rec: rec}, done: make(chan struct{}), cancel: func(error) {}}
	event := func(i int) string {
		e := fmt.Sprintf("data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
		return fmt.Sprintf("%x\r\n%s\r\n", len(e), e)
	}
	poll := func() {
		time.Sleep(time.Millisecond) // the data is in the socket
		l.prevPolledAt, l.polledAt, l.prevComplete = l.polledAt, c.since(), true
		l.ready(cn, unix.EPOLLIN)
	}
	io.WriteString(srv, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+event(1))
	poll()
	for i := 2; i <= 4; i++ {
		time.Sleep(4 * time.Millisecond)
		io.WriteString(srv, event(i))
	}
	poll()
	if len(rec.marks) != 4 || rec.Error != "" {
		t.Fatalf("%d marks, error %q %s", len(rec.marks), rec.Error, rec.Detail)
	}
	if !cn.rx {
		t.Skip("no kernel receive timestamps here: a read's time is its read time")
	}
	m := rec.marks
	for i := 1; i < 4; i++ {
		if gap := m[i].at - m[i-1].at; gap < time.Millisecond || m[i].joint != (i > 1) {
			t.Errorf("gap %d: %v (joint %v): a late read's tokens are spaced, not stacked", i, gap, m[i].joint)
		}
	}
	if m[3].at <= m[0].at+12*time.Millisecond-time.Millisecond || m[3].at > c.since() {
		t.Errorf("the newest token keeps its kernel time: %v after the first", m[3].at-m[0].at)
	}
}
