package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fake is an OpenAI-compatible SSE server with exact, configurable timing and faults.
type fake struct {
	model      string
	ttft, itl  time.Duration // itl is per token
	perChunk   int           // tokens per content chunk
	roleChunk  bool          // send a role-only chunk at once, before the first token
	usage      string        // "continuous", "final" or "none"
	malformed  int           // send garbage as chunk number n (1-based; 0: never)
	cutAfter   int           // close the stream after n content chunks (0: never)
	status     int           // answer every completion with this status (0: 200)
	short      int           // send this many fewer tokens than asked
	noTokenize bool
	noDone     bool
	pauseAfter int // pause for pause after this many content chunks (0: never)
	pause      time.Duration
	strict     bool          // answer 400 to vLLM's extra parameters, as a strict OpenAI-compatible server
	capacity   chan struct{} // when set, at most cap(capacity) streams generate at once
	overhead   int           // chat template tokens added to the prompt count
	tls        bool          // serve https (the test's own certificate: s.Client() trusts it)
	running    atomic.Int64
	queued     atomic.Int64 // waiting for a capacity slot: /metrics' num_requests_waiting
	// waitingGauge, when set, is what /metrics says is waiting instead (a gauge caught at an instant).
	waitingGauge int
	requests     atomic.Int64
}

func (f *fake) start(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, f.model)
	})
	mux.HandleFunc("/tokenize", func(w http.ResponseWriter, r *http.Request) {
		if f.noTokenize {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Prompt   string    `json:"prompt"`
			Messages []message `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		fmt.Fprintf(w, `{"count":%d,"max_model_len":32768}`, f.promptTokens(req.Prompt, req.Messages))
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		waiting := f.queued.Load()
		if f.waitingGauge > 0 {
			waiting = int64(f.waitingGauge)
		}
		fmt.Fprintf(w, "# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name=%q} %d\nvllm:num_requests_waiting{model_name=%q} %d\nvllm:kv_cache_usage_perc{model_name=%q} 0.25\n", f.model, f.running.Load(), f.model, waiting, f.model)
	})
	mux.HandleFunc("/v1/chat/completions", f.complete)
	mux.HandleFunc("/v1/completions", f.complete)
	s := httptest.NewUnstartedServer(mux)
	if f.tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (f *fake) promptTokens(prompt string, msgs []message) int {
	n := len(strings.Fields(prompt))
	for _, m := range msgs {
		n += len(strings.Fields(m.Content)) + f.overhead
	}
	return n
}

func (f *fake) complete(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.strict {
		var raw map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &raw)
		so, _ := raw["stream_options"].(map[string]any)
		if _, bad := raw["min_tokens"]; bad || so["continuous_usage_stats"] != nil {
			http.Error(w, `{"error":{"message":"unknown parameter"}}`, 400)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var req struct {
		Model     string    `json:"model"`
		Prompt    string    `json:"prompt"`
		Messages  []message `json:"messages"`
		MaxTokens int       `json:"max_tokens"`
		Stream    bool      `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	if f.status != 0 {
		http.Error(w, `{"error":{"message":"injected"}}`, f.status)
		return
	}
	chat := strings.HasSuffix(r.URL.Path, "chat/completions")
	pt := f.promptTokens(req.Prompt, req.Messages)
	if !req.Stream {
		fmt.Fprintf(w, `{"choices":[{"text":"x","message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, pt)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		fl.Flush()
	}
	usage := func(done int) string {
		if f.usage == "continuous" {
			return fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, pt, done, pt+done)
		}
		return ""
	}
	if f.roleChunk && chat {
		send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]` + usage(0) + `}`)
	}
	if f.capacity != nil {
		f.queued.Add(1)
		select {
		case f.capacity <- struct{}{}:
			f.queued.Add(-1)
			defer func() { <-f.capacity }()
		case <-r.Context().Done():
			f.queued.Add(-1)
			return
		}
	}
	f.running.Add(1)
	defer f.running.Add(-1)
	total := req.MaxTokens - f.short
	per := max(f.perChunk, 1)
	start := time.Now()
	next := start.Add(f.ttft)
	done, n := 0, 0
	for done < total {
		k := min(per, total-done)
		time.Sleep(time.Until(next))
		n++
		if f.malformed == n {
			send(`{"choices":[{"delta":{"content":"oops"`)
			return
		}
		if f.pauseAfter > 0 && n == f.pauseAfter+1 {
			select {
			case <-time.After(f.pause):
			case <-r.Context().Done():
				return
			}
			next = time.Now()
		}
		if f.cutAfter > 0 && n > f.cutAfter {
			panic(http.ErrAbortHandler) // drop the connection mid-stream
		}
		done += k
		text := strings.Repeat("tok ", k)
		if chat {
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]%s}`, text, usage(done)))
		} else {
			send(fmt.Sprintf(`{"choices":[{"index":0,"text":%q,"finish_reason":null}]%s}`, text, usage(done)))
		}
		next = next.Add(time.Duration(k) * f.itl)
	}
	if f.usage != "none" {
		send(fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`, pt, done))
	}
	if !f.noDone {
		send("[DONE]")
	}
}
