package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// miniServer is a small OpenAI-compatible streaming server: 5 ms to the first token, 1 ms per token.
func miniServer(t *testing.T) *httptest.Server { return miniServerOf(t, "m") }

// miniServerOf is miniServer serving model.
func miniServerOf(t *testing.T, model string) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"data":[{"id":%q}]}`, model)
	})
	mux.HandleFunc("/tokenize", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		n := 0
		for _, m := range req.Messages {
			n += len(strings.Fields(m.Content))
		}
		fmt.Fprintf(w, `{"count":%d}`, n)
	})
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		fl := w.(http.Flusher)
		time.Sleep(5 * time.Millisecond)
		for i := 1; i <= req.MaxTokens; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x \"}}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d}}\n\n", i)
			fl.Flush()
			time.Sleep(time.Millisecond)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestBenchCommand(t *testing.T) {
	s := miniServer(t)
	dir := t.TempDir()
	out, rec := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.jsonl")
	code := execute([]string{"bench", "--url", s.URL, "--model", "m", "--profile", "sweep", "--rates", "5",
		"--max-concurrency", "4", "--max-duration", "300ms", "--prompt-tokens", "32", "--output-tokens", "8",
		"--out", out, "--records", rec, "--no-metrics"})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := readLoad(t, out)
	if l.Saturation == nil || l.Saturation.Knee == nil || len(l.Runs) != 6+len(l.Saturation.Knee.Probes)+l.Saturation.Knee.ClimbedRungs || l.Config.Profile != "sweep" || l.Config.PromptTokens != 32 {
		t.Fatalf("result: %d runs, saturation %v, config %+v", len(l.Runs), l.Saturation, l.Config)
	}
	if st, err := os.Stat(rec); err != nil || st.Size() == 0 {
		t.Fatalf("records: %v", err)
	}
}

func TestBenchBadInputExit2(t *testing.T) {
	s := miniServer(t)
	for _, args := range [][]string{
		{"bench", "--url", s.URL, "--model", "m", "--profile", "nope"},
		{"bench", "--url", s.URL, "--model", "m", "--profile", "constant", "--rate", "0"},
		{"bench", "--url", s.URL, "--model", "m", "--profile", "concurrency", "--concurrency", "0"},
		// Bounded inputs (a concurrency of 2^63 wrapped the open-files check and ran on).
		{"bench", "--url", s.URL, "--model", "m", "--profile", "concurrency", "--concurrency", "9223372036854775807"},
		{"bench", "--url", s.URL, "--model", "m", "--max-concurrency", "9223372036854775807"},
		{"bench", "--url", s.URL, "--model", "m", "--output-tokens", "9223372036854775807"},
		{"bench", "--url", s.URL, "--model", "m", "--max-duration", "2562047h"},
		{"bench", "--url", s.URL, "--model", "m", "--prompt-tokens", "abc"},
		{"bench", "--url", s.URL, "--model", "m", "--slo", "ttft=fast"},
		{"bench", "--url", s.URL, "--model", "other"},
		{"bench", "--url", "http://127.0.0.1:1", "--model", "m"},
		{"bench", "--url", s.URL, "--model", "m", "--tokenizer", "testdata/no-such-tokenizer.json"},
		{"bench", "--url", s.URL, "--model", "m", "--tokenizer", "testdata/h200-idle.xml"},
		// An unwritable --out is refused before the load runs (a minute of load here, were it run).
		{"bench", "--url", s.URL, "--model", "m", "--max-duration", "60s", "--out", "/proc/nope/x.json"},
		{"bench", "--url", s.URL, "--model", "m", "--max-duration", "60s", "--out", os.TempDir()},
	} {
		if code := execute(args); code != exitBadUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// --tokenizer sizes prompts with the given tokenizer.json; the result says so, and the server's
// /tokenize (one token per word here) supplies the chat template's share.
func TestBenchTokenizerFlag(t *testing.T) {
	s := miniServer(t)
	out := filepath.Join(t.TempDir(), "r.json")
	code := execute([]string{"bench", "--url", s.URL, "--model", "m", "--profile", "synchronous", "--max-requests", "2",
		"--prompt-tokens", "40", "--output-tokens", "4", "--tokenizer", "testdata/words-bpe.json", "--out", out, "--no-metrics"})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := readLoad(t, out)
	if want := "tokenizer.json (testdata/words-bpe.json); chat template -2 tokens by server /tokenize"; l.TokenCounts != want {
		t.Errorf("token_counts %q, want %q", l.TokenCounts, want)
	}
}

// readLoad reads the results.Load that `gpuvet bench --out` wrote.
func readLoad(t *testing.T, path string) results.Load {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l results.Load
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// faultyServer answers every third request with HTTP 500; the rest stream 4 tokens.
func faultyServer(t *testing.T) *httptest.Server {
	var n atomic.Int64
	ok := miniServer(t)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" && n.Add(1)%3 == 0 {
			http.Error(w, `{"error":{"message":"injected"}}`, http.StatusInternalServerError)
			return
		}
		u := *r.URL
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, ok.URL+u.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 4096)
		for {
			k, err := resp.Body.Read(buf)
			w.Write(buf[:k])
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// A third of the requests failing is exit 1 with the errors by kind; a share under the limit
// passes with the errors said.
func TestBenchErrorRateGate(t *testing.T) {
	s := faultyServer(t)
	for _, tc := range []struct {
		limit string
		code  int
	}{{"", exitFailed}, {"50", 0}} {
		args := []string{"bench", "--url", s.URL, "--model", "m", "--profile", "synchronous", "--max-requests", "9",
			"--prompt-tokens", "8", "--output-tokens", "4", "--no-metrics"}
		if tc.limit != "" {
			args = append(args, "--max-error-rate-pct", tc.limit)
		}
		var stderr bytes.Buffer
		code := executeTo(args, nil, &stderr)
		if code != tc.code {
			t.Errorf("--max-error-rate-pct %q: exit %d, want %d (%s)", tc.limit, code, tc.code, stderr.String())
		}
		// A failure says it as the exit error (on os.Stderr); errors under the limit are said here.
		if tc.code == 0 && (!strings.Contains(stderr.String(), "requests failed") || !strings.Contains(stderr.String(), "http_500")) {
			t.Errorf("stderr %q does not give the errors by kind", stderr.String())
		}
	}
}

// --max-requests alone is not cut by the default --max-duration; with both, the result says which
// bound ended each rung and stderr says the budget was cut.
func TestBenchMaxRequestsLiftsDefaultDuration(t *testing.T) {
	s := miniServer(t)
	dir := t.TempDir()
	base := []string{"bench", "--url", s.URL, "--model", "m", "--profile", "synchronous", "--max-requests", "12",
		"--prompt-tokens", "8", "--output-tokens", "40", "--no-metrics"}

	out := filepath.Join(dir, "a.json")
	if code := execute(append(base, "--out", out)); code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := readLoad(t, out)
	if l.Config.MaxDuration != 0 || l.Runs[0].EndedBy != "max_requests" || l.Runs[0].Requests.Successful != 12 {
		t.Errorf("max_duration %v, ended_by %q, %d successful; want no duration, max_requests, 12",
			time.Duration(l.Config.MaxDuration), l.Runs[0].EndedBy, l.Runs[0].Requests.Successful)
	}

	out = filepath.Join(dir, "b.json")
	var stderr bytes.Buffer
	code := executeTo(append(base, "--max-duration", "150ms", "--out", out), nil, &stderr)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l = readLoad(t, out)
	if l.Runs[0].EndedBy != "max_duration" || !strings.Contains(stderr.String(), "before --max-requests 12") {
		t.Errorf("ended_by %q (%d successful), stderr %q; want max_duration and a warning", l.Runs[0].EndedBy, l.Runs[0].Requests.Successful, stderr.String())
	}
}

// A prompt file with a line that is not JSON is bad input: exit 2 before any request is sent.
func TestBenchBadDataFileExit2(t *testing.T) {
	var requests atomic.Int64
	s := miniServer(t)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Redirect(w, r, s.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(counting.Close)
	data := filepath.Join(t.TempDir(), "p.jsonl")
	os.WriteFile(data, []byte("{\"prompt\": \"hello\"}\nnot json\n"), 0o644)
	var stderr bytes.Buffer
	code := executeTo([]string{"bench", "--url", counting.URL, "--model", "m", "--profile", "synchronous", "--max-requests", "2",
		"--data", data, "--no-metrics"}, nil, &stderr)
	if code != exitBadUsage || requests.Load() != 0 {
		t.Fatalf("exit %d after %d requests, want 2 before any (%s)", code, requests.Load(), stderr.String())
	}
}

// Issue 27: a server that never answers one request in ten. The hung requests were cancelled by the
// drain as "incomplete" and bench exited 0 with 0 errors; now they are no_answer errors (judged
// against the TTFTs seen, after the 10 s silence floor), counted by the error gate: exit 1, and
// the terminal names the kind.
func TestBenchHungRequestsFailTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s silence floor")
	}
	t.Parallel()
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
			return
		case "/tokenize":
			var req struct {
				Messages []struct{ Content string } `json:"messages"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			fmt.Fprintf(w, `{"count":%d}`, len(strings.Fields(req.Messages[0].Content)))
			return
		}
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if k := n.Add(1); k%10 == 3 {
			select { // never answers
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute):
			}
			return
		}
		fl := w.(http.Flusher)
		for i := 1; i <= req.MaxTokens; i++ {
			time.Sleep(2 * time.Millisecond)
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x \"}}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d}}\n\n", i)
			fl.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout bytes.Buffer
	start := time.Now()
	code := executeTo([]string{"bench", "--url", s.URL, "--model", "m", "--profile", "concurrency", "--concurrency", "4",
		"--max-duration", "2s", "--prompt-tokens", "8", "--output-tokens", "8", "--max-error-rate-pct", "1", "--no-metrics", "--out", out}, &stdout, nil)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1 (%s)", code, stdout.String())
	}
	l := readLoad(t, out)
	r := l.Runs[0]
	// A hung request no answered one was sent after (the last sent) stays incomplete, with its reason.
	if r.Errors["no_answer"] == 0 || r.Requests.Incomplete > 1 {
		t.Fatalf("errors %v requests %+v: want the hung requests as no_answer", r.Errors, r.Requests)
	}
	if !strings.Contains(stdout.String(), "no_answer=") {
		t.Fatalf("the terminal does not name the kind:\n%s", stdout.String())
	}
	// The duration (2 s) and the drain bound (30 s) bound it; the floor judges within them.
	if d := time.Since(start); d > 40*time.Second {
		t.Fatalf("bench took %v", d)
	}
}

// The bench against a server that answers every request with an error (here: one token,
// then usage.completion_tokens of 1e15, a short output once the claim is disbelieved) ends on its
// errors within a few dozen requests, not at load.max_rung_duration waiting for 30 completions
// (143,555 failed requests before). Bounded by request count: past maxBad requests the server
// answers properly, so that a client that does not stop on its errors finishes soon after, and fails
// the count.
func TestBenchAllFailingEndsOnItsErrors(t *testing.T) {
	const maxBad = 500
	var n atomic.Int64
	ok := miniServer(t)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || n.Add(1) > maxBad {
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, ok.URL+r.URL.RequestURI(), r.Body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			io.Copy(w, resp.Body)
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x \"}}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1000000000000000}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	out := filepath.Join(t.TempDir(), "r.json")
	var stderr bytes.Buffer
	code := executeTo([]string{"bench", "--url", s.URL, "--model", "m", "--profile", "concurrency", "--concurrency", "8",
		"--max-duration", "5s", "--prompt-tokens", "8", "--output-tokens", "16", "--no-metrics", "--out", out}, nil, &stderr)
	sent := n.Load()
	if code != exitFailed || sent > maxBad {
		t.Fatalf("exit %d after %d completion requests (want %d, and far fewer than %d): %s", code, sent, exitFailed, maxBad, stderr.String())
	}
	l := readLoad(t, out)
	if r := l.Runs[0]; r.EndedBy != "errors" || r.Requests.Successful != 0 || !strings.Contains(stderr.String(), "no successful one") {
		t.Errorf("run %+v ended by %q; stderr %q: want it ended by its errors, said", r.Requests, r.EndedBy, stderr.String())
	}
	t.Logf("%d requests; %s", sent, stderr.String())
}
