package functional

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// fault makes the fake server misbehave in one way the suite must catch.
type fault string

// fakeServer is an OpenAI-compatible server with faults to inject (the simulator is the
// well-behaved one; this fake exists to break each rule on purpose).
func fakeServer(f fault) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			Stream    bool   `json:"stream"`
			Messages  []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		prompt := len(strings.Fields(req.Messages[0].Content))
		if req.Model != "m" && f != "unknown_model_ok" {
			w.WriteHeader(404)
			if f != "no_error_body" {
				fmt.Fprint(w, `{"error":{"message":"model not found","type":"NotFoundError"}}`)
			}
			return
		}
		if prompt > 1024 {
			if f == "overflow_500" {
				w.WriteHeader(500)
				return
			}
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"maximum context length is 1024 tokens"}}`)
			return
		}
		out, finish := min(req.MaxTokens, 20), "stop"
		if req.MaxTokens <= 20 {
			finish = "length"
		}
		if f == "ignore_max_tokens" && !req.Stream {
			out, finish = 50, "stop"
		}
		if f == "mixed_usage" {
			prompt = 10
		}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < out || f == "endless_stream"; i++ {
				if r.Context().Err() != nil {
					return
				}
				if f == "thinks" { // a reasoning model whose short answer is all thinking (vLLM's newer field)
					fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"reasoning\":\"t%d \"}}]}\n\n", i)
				} else {
					fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
				}
				w.(http.Flusher).Flush()
			}
			if f == "flush_chunk" { // the text a detokeniser held back, in a chunk of no token
				fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"\\ufffd\"}}]}\n\n")
			}
			if f != "no_done" {
				fmt.Fprint(w, "data: [DONE]\n\n")
			}
			return
		}
		msg := map[string]any{"content": strings.Repeat("x ", out)}
		if f == "thinks" {
			msg = map[string]any{"content": nil, "reasoning": strings.Repeat("x ", out)}
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id":      fmt.Sprintf("c-%d", time.Now().UnixNano()),
			"choices": []any{map[string]any{"message": msg, "finish_reason": finish}},
			"usage":   map[string]int{"prompt_tokens": prompt, "completion_tokens": out},
		})
	}))
}

func TestSuite(t *testing.T) {
	tests := []struct {
		fault  fault
		status results.Status
		failed string // the one test that must fail ("" = none)
	}{
		{"", results.StatusOK, ""},
		// A real detokeniser's last chunk of held-back text (vLLM's, the transformers front's).
		{"flush_chunk", results.StatusOK, ""},
		// A reasoning model (vLLM's reasoning parser) spends a short answer thinking: its text comes
		// as reasoning, none as content, and the engine is healthy.
		{"thinks", results.StatusOK, ""},
		{"ignore_max_tokens", results.StatusFlag, MaxTokensLength},
		{"no_done", results.StatusFlag, StreamDone},
		// A stream that ignores max_tokens and never stops fails at once, not at the request timeout.
		{"endless_stream", results.StatusFlag, StreamDone},
		{"unknown_model_ok", results.StatusFlag, UnknownModel4xx},
		{"no_error_body", results.StatusFlag, UnknownModel4xx},
		{"overflow_500", results.StatusFlag, ContextOverflow4xx},
		{"mixed_usage", results.StatusFlag, ConcurrentIsolation},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			srv := fakeServer(tt.fault)
			defer srv.Close()
			start := time.Now()
			r := Run(context.Background(), Options{URL: srv.URL, Model: "m", MaxModelLen: 1024})
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("the suite took %v", d)
			}
			if r.Status != tt.status || len(r.Tests) != 7 {
				t.Fatalf("status %s (%d tests), want %s: %+v", r.Status, len(r.Tests), tt.status, r.Tests)
			}
			for _, ft := range r.Tests {
				if ft.Passed == (ft.Name == tt.failed) {
					t.Errorf("%s: passed=%v (%s)", ft.Name, ft.Passed, ft.Detail)
				}
			}
		})
	}
}

func TestUnrunnableIsFailedNeverPass(t *testing.T) {
	srv := fakeServer("")
	url := srv.URL
	srv.Close() // nothing listens any more
	r := Run(context.Background(), Options{URL: url, Model: "m", Timeout: 2 * time.Second})
	if r.Status != results.StatusFailed || r.Error == "" || len(r.Tests) != 7 {
		t.Fatalf("want a failed suite with 7 failed tests, got %+v", r)
	}
	for _, ft := range r.Tests {
		if ft.Passed {
			t.Errorf("%s passed against a dead server", ft.Name)
		}
	}
}

// A server that echoes the API key in its error bodies leaves it out of the suite's details.
func TestKeyEchoIsRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprintf(w, `{"error":{"message":"bad %s"}}`, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	r := Run(context.Background(), Options{URL: srv.URL, Model: "m", APIKey: "sk-echoed-key-123"})
	for _, ft := range r.Tests {
		if strings.Contains(ft.Detail, "sk-echoed-key-123") {
			t.Fatalf("%s: %s", ft.Name, ft.Detail)
		}
	}
}

// A redirect is never followed: the API key would go to its target, and the suite would test
// another server than the one it names.
func TestRedirectIsNotFollowed(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(200)
	}))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	r := Run(context.Background(), Options{URL: srv.URL, Model: "m", APIKey: "sk-redirected-key"})
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests (each with the API key)", n)
	}
	if r.Status == results.StatusOK {
		t.Fatalf("a server answering every request with a redirect passed the suite")
	}
}
