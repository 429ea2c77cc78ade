package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// event is one SSE data line as a test client saw it.
type event struct {
	data string
	at   time.Duration // since the request was written
	obj  map[string]any
	bad  bool // not valid JSON
}

type streamResult struct {
	status int
	events []event
	done   bool  // saw data: [DONE]
	err    error // read error (a cut stream)
	body   []byte
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func post(t *testing.T, url string, body any) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// streamReq posts a streaming request and collects its SSE events with arrival times.
func streamReq(t *testing.T, url string, body any) streamResult {
	t.Helper()
	b, _ := json.Marshal(body)
	t0 := time.Now()
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := streamResult{status: resp.StatusCode}
	if resp.StatusCode != 200 {
		r.body, _ = io.ReadAll(resp.Body)
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		d := strings.TrimPrefix(line, "data: ")
		if d == "[DONE]" {
			r.done = true
			continue
		}
		ev := event{data: d, at: time.Since(t0)}
		if err := json.Unmarshal([]byte(d), &ev.obj); err != nil {
			ev.bad = true
		}
		r.events = append(r.events, ev)
	}
	r.err = sc.Err()
	return r
}

// content returns the generated text of an event ("" for role-only, usage-only or bad events).
func (e event) content() (string, bool) {
	if e.bad {
		return "", false
	}
	ch, _ := e.obj["choices"].([]any)
	if len(ch) == 0 {
		return "", false
	}
	c := ch[0].(map[string]any)
	if t, ok := c["text"].(string); ok {
		return t, true
	}
	if d, ok := c["delta"].(map[string]any); ok {
		if t, ok := d["content"].(string); ok && t != "" {
			return t, true
		}
	}
	return "", false
}

func (r streamResult) contentEvents() []event {
	var out []event
	for _, e := range r.events {
		if _, ok := e.content(); ok {
			out = append(out, e)
		}
	}
	return out
}
