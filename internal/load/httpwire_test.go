package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// splitFeed feeds b to p in pieces cut at the offsets cuts draws (each byte of cuts is a piece length,
// 1..256), collecting the body; then the connection closes. It returns the body, the status, whether
// the response completed, and the first error.
func splitFeed(b, cuts []byte) (body []byte, status int, done bool, err error) {
	var p respParser
	k := 0
	for len(b) > 0 && !p.Done() {
		n := len(b)
		if len(cuts) > 0 {
			n = min(n, int(cuts[k%len(cuts)])+1)
			k++
		}
		used, ferr := p.feed(b[:n], func(x []byte) bool { body = append(body, x...); return true })
		if ferr != nil {
			return body, p.Status, false, ferr
		}
		if used < n {
			break // the response ended inside the piece
		}
		b = b[n:]
	}
	if !p.Done() {
		if err := p.eof(); err != nil {
			return body, p.Status, false, err
		}
	}
	return body, p.Status, true, nil
}

// netHTTPRead reads the same bytes with net/http's client-side response reader.
func netHTTPRead(b []byte) (body []byte, status int, err error) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), &http.Request{Method: http.MethodPost})
	if err != nil {
		return nil, 0, err
	}
	body, err = io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

const chunkedHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func TestRespParser(t *testing.T) {
	for _, c := range []struct {
		name, in, body string
		status         int
		err            bool
	}{
		{"chunked", chunkedHead + "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n", "hello world", 200, false},
		{"trailer", chunkedHead + "2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n", "hi", 200, false},
		{"length", "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\n\r\nbusy", "busy", 429, false},
		{"until close", "HTTP/1.0 200 OK\r\n\r\ndata: x\n\n", "data: x\n\n", 200, false},
		{"bare LF head", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", "ok", 200, false},
		{"continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", "", 204, false},
		{"cut chunk", chunkedHead + "5\r\nhel", "hel", 200, true},
		{"cut head", "HTTP/1.1 200 OK\r\nContent-Le", "", 0, true},
		{"bad size", chunkedHead + "zz\r\nhello\r\n", "", 200, true},
		{"no CRLF after data", chunkedHead + "2\r\nhiXX0\r\n\r\n", "hi", 200, true},
		{"bad status", "HTTX/1.1 200 OK\r\n\r\n", "", 0, true},
		{"bad encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "", 200, true},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", "", 200, true},
	} {
		for _, cuts := range [][]byte{nil, {0}, {2, 7}} {
			body, status, _, err := splitFeed([]byte(c.in), cuts)
			if string(body) != c.body || status != c.status || (err != nil) != c.err {
				t.Errorf("%s (cuts %v): body %q status %d err %v; want %q %d err=%v", c.name, cuts, body, status, err, c.body, c.status, c.err)
			}
		}
	}
	var p respParser
	if _, err := p.feed([]byte("HTTP/1.1 200 OK\r\n"+strings.Repeat("X-Pad: 0123456789\r\n", 4000)), nil); err == nil {
		t.Error("a 76 KB head was accepted")
	}
	if err := (&respParser{}).eof(); !errors.Is(err, errNoResponse) {
		t.Errorf("close before any byte: %v", err)
	}
}

// FuzzChunkedAgainstNetHTTP holds the chunked decoder to net/http's: over any body after a chunked
// head, fed in any pieces, what net/http reads without error this parser reads the same, completely;
// where net/http refuses, this parser refuses too or has read the same bytes up to that point (it is
// laxer only about trailer header syntax).
func FuzzChunkedAgainstNetHTTP(f *testing.F) {
	for _, s := range []string{"5\r\nhello\r\n0\r\n\r\n", "1;a=b\r\nx\r\n0\r\nT: v\r\n\r\n", "3\r\nabc\n", "0\r\n\r\n", "ff\r\n", "\r\n", "1\r\nx\r\r\n",
		"0\r\nA: b\r\n \r\n\r\n", "2\r\nok\r\n0\r\nno colon\r\n\r\n"} { // trailers of any syntax are skipped, as net/http does (found by 5 minutes of fuzzing)
		f.Add([]byte(s), []byte{3, 1})
	}
	f.Fuzz(func(t *testing.T, chunked, cuts []byte) {
		in := append([]byte(chunkedHead), chunked...)
		want, _, werr := netHTTPRead(in)
		got, status, done, err := splitFeed(in, cuts)
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		if werr == nil {
			if err != nil || !done || !bytes.Equal(got, want) {
				t.Fatalf("net/http read %q; this parser %q done %v err %v", want, got, done, err)
			}
			return
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("net/http failed (%v) after %q; this parser read %q without error", werr, want, got)
		}
	})
}

// FuzzRespHead: any response head, fed in any pieces, never panics; where net/http reads a response
// and its whole body, this parser reads the same status and body.
func FuzzRespHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		chunkedHead + "2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"error\":1}",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/0.0 200\r\nContent-Length: 1\r\n\r\nx", // net/http reads any HTTP/d.d (found by 5 minutes of fuzzing)
		"HTTP/2.0 200 OK\r\nContent-Length: 1\r\n\r\ny",
	} {
		f.Add([]byte(s), []byte{5})
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		got, status, done, err := splitFeed(in, cuts)
		want, wstatus, werr := netHTTPRead(in)
		if werr != nil || wstatus < 200 { // ReadResponse returns a 1xx itself; the transport skips it, as this parser does

			return
		}
		if err != nil || !done || status != wstatus || !bytes.Equal(got, want) {
			t.Fatalf("net/http: %d %q; this parser: %d %q done %v err %v", wstatus, want, status, got, done, err)
		}
	})
}

func TestWriteRequest(t *testing.T) {
	b := writeRequest(nil, "h:1", "/v1/completions", "sk-x", []byte(`{"a":1}`))
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.Host != "h:1" || req.URL.Path != "/v1/completions" || string(body) != `{"a":1}` ||
		req.Header.Get("Authorization") != "Bearer sk-x" || req.Header.Get("Accept") != "text/event-stream" || req.ContentLength != 7 {
		t.Fatalf("%+v body %q", req, body)
	}
	if b := writeRequest(nil, "h", "/", "", nil); bytes.Contains(b, []byte("Authorization")) {
		t.Fatalf("no key, but %q", b)
	}
}

// BenchmarkEventLoopParse is the event loop's per-event work on a chunked SSE stream as vLLM sends it
// (one HTTP chunk per event, continuous usage): HTTP framing, SSE framing and the chunk parser.
func BenchmarkEventLoopParse(b *testing.B) {
	var stream []byte
	const events = 128
	for i := range events {
		ev := fmt.Sprintf(`data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":64,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", i+1, i+65)
		stream = fmt.Appendf(stream, "%x\r\n%s\r\n", len(ev), ev)
	}
	stream = append(stream, "0\r\n\r\n"...)
	in := append([]byte(chunkedHead), stream...)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var p respParser
	var f sseFramer
	n := 0
	emit := func(d []byte) bool {
		if _, err := parseChunk(d); err != nil {
			b.Fatal(err)
		}
		n++
		return true
	}
	body := func(x []byte) bool { return f.feed(x, emit) }
	for b.Loop() {
		p.reset()
		f.reset()
		// A read per event, as a 1 ms poll of a stream with a 4 ms ITL sees it.
		for rest := in; len(rest) > 0; {
			k := min(len(rest), 300)
			if _, err := p.feed(rest[:k], body); err != nil {
				b.Fatal(err)
			}
			rest = rest[k:]
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
}
