package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// miniServer is a small OpenAI-compatible streaming server: 5 ms to the first token, 1 ms per token.
func miniServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
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
	resetFlags(root)
	code := execute([]string{"bench", "--url", s.URL, "--model", "m", "--profile", "sweep", "--rates", "5",
		"--max-concurrency", "4", "--max-duration", "300ms", "--prompt-tokens", "32", "--output-tokens", "8",
		"--out", out, "--records", rec, "--no-metrics"})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := readLoad(t, out)
	if len(l.Runs) != 7 || l.Saturation == nil || l.Config.Profile != "sweep" || l.Config.PromptTokens != 32 {
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
		resetFlags(root)
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
	resetFlags(root)
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
