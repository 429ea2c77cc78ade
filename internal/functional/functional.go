// Package functional is the API conformance suite run against every served model (the seed's
// suite, exactly): a chat completion answers; max_tokens is honoured with finish_reason "length";
// a stream ends with [DONE]; an unknown model gets a 4xx with an error body; a context overflow
// gets a 4xx and the server still answers the next request; four concurrent requests of different
// prompt lengths come back isolated (prompt_tokens strictly increasing with prompt length).
// A suite that cannot run is a failure, never a pass.
package functional

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Options say what to test.
type Options struct {
	URL         string // base URL, e.g. http://127.0.0.1:8000
	Model       string
	APIKey      string        // from the environment only
	MaxModelLen int           // the configured context length; the server's own (from /v1/models) wins when it reports one
	Timeout     time.Duration // per request (default 60 s)
	Client      *http.Client
}

// Test names, stable ids in summary.json.
const (
	ChatCompletion      = "chat_completion"
	MaxTokensLength     = "max_tokens_length"
	StreamDone          = "stream_done"
	UnknownModel4xx     = "unknown_model_4xx"
	ContextOverflow4xx  = "context_overflow_4xx"
	ConcurrentIsolation = "concurrent_isolation"
)

type suite struct {
	o         Options
	greedyOut *results.GreedyOutputs // what the greedy case received
}

// Run runs the whole suite. The result's Status is ok when every test passed, flag when a test
// failed, failed when the suite could not run (the server did not answer at all).
func Run(ctx context.Context, o Options) *results.Functional {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Client == nil {
		// A redirect is the answer itself: followed, it would send the API key to its target and test
		// another server (the load's rule too).
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.MaxModelLen <= 0 {
		o.MaxModelLen = 1024
	}
	s := &suite{o: o}
	// The overflow test must exceed the context the server really serves: a template that does not
	// pass max_model_len to the engine serves the model's full context, not the configured one.
	if n := s.servedMaxModelLen(ctx); n > 0 {
		s.o.MaxModelLen = n
	}
	tests := []struct {
		name string
		fn   func(context.Context) (string, error)
	}{
		{ChatCompletion, s.chat},
		{MaxTokensLength, s.maxTokens},
		{StreamDone, s.stream},
		{UnknownModel4xx, s.unknownModel},
		{ContextOverflow4xx, s.contextOverflow},
		{ConcurrentIsolation, s.concurrent},
		{GreedyOutputs, s.greedy},
	}
	out := &results.Functional{Status: results.StatusOK}
	for i, tt := range tests {
		detail, err := tt.fn(ctx)
		if err != nil && unreachable(err) && i == 0 {
			// Nothing answers: every test is failed, not skipped, and the suite is failed.
			out.Status = results.StatusFailed
			out.Error = fmt.Sprintf("suite could not run: %v", err)
			for _, t := range tests {
				out.Tests = append(out.Tests, results.FunctionalTest{Name: t.name, Passed: false, Detail: "not run: " + err.Error()})
			}
			return out
		}
		ft := results.FunctionalTest{Name: tt.name, Passed: err == nil, Detail: detail}
		if err != nil {
			ft.Detail = err.Error()
			out.Status = results.Worse(out.Status, results.StatusFlag)
		}
		if o.APIKey != "" { // details quote the server, which may echo the key
			ft.Detail = strings.ReplaceAll(ft.Detail, o.APIKey, "[redacted]")
		}
		out.Tests = append(out.Tests, ft)
	}
	out.Greedy = s.greedyOut
	return out
}

// servedMaxModelLen reads max_model_len for the model from /v1/models (vLLM and SGLang report it);
// 0 when the server does not say.
func (s *suite) servedMaxModelLen(ctx context.Context) int {
	resp, cancel, err := s.do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return 0
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	return results.ModelMaxLen(resp.Body, s.o.Model)
}

// do sends a request to path under the server's URL with the API key; cancel ends its timeout once
// the body has been read.
func (s *suite) do(ctx context.Context, method, path string, body map[string]any) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, results.JoinURL(s.o.URL, path), rd)
	if err == nil {
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if s.o.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+s.o.APIKey)
		}
		var resp *http.Response
		if resp, err = s.o.Client.Do(req); err == nil {
			return resp, cancel, nil
		}
	}
	cancel()
	return nil, nil, err
}

func unreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF)
}

// generated is a message's or a delta's text: content, and a reasoning model's reasoning.
type generated struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"` // vLLM's newer name for reasoning_content
}

func (g generated) text() string { return g.Content + g.ReasoningContent + g.Reasoning }

type chatResp struct {
	ID      string `json:"id"`
	Choices []struct {
		Message      generated `json:"message"`
		FinishReason string    `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// post sends a chat completion request and returns status and body.
func (s *suite) post(ctx context.Context, body map[string]any) (int, []byte, error) {
	resp, cancel, err := s.do(ctx, http.MethodPost, "/v1/chat/completions", body)
	if err != nil {
		return 0, nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, rb, err
}

func (s *suite) body(prompt string, maxTokens int) map[string]any {
	return map[string]any{
		"model":       s.o.Model,
		"messages":    []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens":  maxTokens,
		"temperature": 0,
	}
}

func (s *suite) complete(ctx context.Context, body map[string]any) (*chatResp, error) {
	code, b, err := s.post(ctx, body)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("want HTTP 200, got %d: %.200s", code, b)
	}
	var r chatResp
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("want an OpenAI chat completion JSON, got %.200s (%w)", b, err)
	}
	if len(r.Choices) == 0 {
		return nil, fmt.Errorf("no choices in the answer: %.200s", b)
	}
	return &r, nil
}

func (s *suite) chat(ctx context.Context) (string, error) {
	r, err := s.complete(ctx, s.body("What is the capital of France? Answer in one word.", 32))
	if err != nil {
		return "", err
	}
	c := r.Choices[0].Message.text()
	if strings.TrimSpace(c) == "" {
		return "", fmt.Errorf("empty answer (finish_reason %q)", r.Choices[0].FinishReason)
	}
	return fmt.Sprintf("answered %d chars, finish_reason %q", len(c), r.Choices[0].FinishReason), nil
}

func (s *suite) maxTokens(ctx context.Context) (string, error) {
	const n = 5
	r, err := s.complete(ctx, s.body("Write a long story about a lighthouse keeper, at least five hundred words.", n))
	if err != nil {
		return "", err
	}
	fr := r.Choices[0].FinishReason
	if fr != "length" {
		return "", fmt.Errorf("max_tokens=%d: want finish_reason \"length\", got %q", n, fr)
	}
	if r.Usage == nil {
		return "", fmt.Errorf("max_tokens=%d: the answer has no usage to check completion_tokens against", n)
	}
	if r.Usage.CompletionTokens > n || r.Usage.CompletionTokens < 1 {
		return "", fmt.Errorf("max_tokens=%d: got completion_tokens %d", n, r.Usage.CompletionTokens)
	}
	return fmt.Sprintf("finish_reason length, completion_tokens %d ≤ %d", r.Usage.CompletionTokens, n), nil
}

func (s *suite) stream(ctx context.Context) (string, error) {
	const maxTokens = 16
	body := s.body("Count from one to five.", maxTokens)
	body["stream"] = true
	resp, cancel, err := s.do(ctx, http.MethodPost, "/v1/chat/completions", body)
	if err != nil {
		return "", err
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return "", fmt.Errorf("want HTTP 200, got %d: %.200s", resp.StatusCode, rb)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	chunks, content, done := 0, 0, false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		data := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if done {
			return "", fmt.Errorf("data after [DONE]: %.100s", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta generated `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return "", fmt.Errorf("chunk %d is not JSON: %.100s", chunks+1, data)
		}
		chunks++
		// A reasoning model's text comes as reasoning (all of it, when a short answer is spent
		// thinking): it is generated text as much as content is.
		if len(c.Choices) > 0 && c.Choices[0].Delta.text() != "" {
			content++
		}
		// A chunk with text carries a token at least, but for the last one a real detokeniser may
		// send with the text it held back: more of them than max_tokens + 1 is a server that
		// ignores it (an API defect the load reports too, as over_max_tokens), and may never stop.
		if content > maxTokens+1 {
			return "", fmt.Errorf("stream went past max_tokens=%d: %d chunks with content and no end yet", maxTokens, content)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("stream cut after %d chunks: %w", chunks, err)
	}
	if !done {
		return "", fmt.Errorf("stream ended after %d chunks without data: [DONE]", chunks)
	}
	if content == 0 {
		return "", fmt.Errorf("stream had no chunk with generated text (content or reasoning)")
	}
	return fmt.Sprintf("%d chunks (%d with text), ended with [DONE]", chunks, content), nil
}

// refused checks a 4xx answer that carries an error body (OpenAI's {"error": {...}}, FastAPI's
// {"detail": ...}, or {"message": ...}); what names the case, detail adds to its 4xx message.
func refused(code int, b []byte, what, detail string) error {
	if code < 400 || code > 499 {
		return fmt.Errorf("%s%s: want a 4xx, got HTTP %d", what, detail, code)
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		for _, k := range []string{"error", "detail", "message"} {
			if v, ok := m[k]; ok && v != nil && v != "" {
				return nil
			}
		}
	}
	return fmt.Errorf("%s: HTTP %d without an error body: %.200s", what, code, b)
}

func (s *suite) unknownModel(ctx context.Context) (string, error) {
	body := s.body("Hello", 4)
	body["model"] = "gpuvet/no-such-model-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	code, b, err := s.post(ctx, body)
	if err != nil {
		return "", err
	}
	if err := refused(code, b, "unknown model", ""); err != nil {
		return "", err
	}
	return fmt.Sprintf("HTTP %d with an error body", code), nil
}

func (s *suite) contextOverflow(ctx context.Context) (string, error) {
	// Each " hello" is at least one token; twice the context is over it with any tokenizer.
	words := 2*s.o.MaxModelLen + 16
	code, b, err := s.post(ctx, s.body(strings.Repeat("hello ", words), 16))
	if err != nil {
		return "", fmt.Errorf("context overflow: %w", err)
	}
	detail := fmt.Sprintf(" (%d words > max_model_len %d)", words, s.o.MaxModelLen)
	if err := refused(code, b, "context overflow", detail); err != nil {
		return "", err
	}
	if _, err := s.complete(ctx, s.body("Say hello.", 8)); err != nil {
		return "", fmt.Errorf("context overflow gave HTTP %d, but the next request failed: %w", code, err)
	}
	return fmt.Sprintf("HTTP %d, and the server answered the next request", code), nil
}

func (s *suite) concurrent(ctx context.Context) (string, error) {
	words := []int{8, 32, 96, 256}
	for i := range words {
		// Under a small context each is clipped to its own share of a third of it, so the four
		// stay different lengths (clipped to the same bound, the longest two were equal).
		words[i] = min(words[i], max(1, s.o.MaxModelLen/3*(i+1)/len(words)))
	}
	type res struct {
		r   *chatResp
		err error
	}
	out := make([]res, len(words))
	var wg sync.WaitGroup
	for i, n := range words {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := fmt.Sprintf("Request %d. Repeat nothing, just say OK. %s", i, strings.Repeat("word ", n))
			r, err := s.complete(ctx, s.body(prompt, 8))
			out[i] = res{r, err}
		}()
	}
	wg.Wait()
	prev, ids := -1, map[string]bool{}
	var got []string
	for i, o := range out {
		if o.err != nil {
			return "", fmt.Errorf("request %d of 4: %w", i+1, o.err)
		}
		if o.r.Usage == nil {
			return "", fmt.Errorf("request %d of 4: no usage in the answer: cannot check isolation", i+1)
		}
		pt := o.r.Usage.PromptTokens
		got = append(got, fmt.Sprint(pt))
		if pt <= prev {
			return "", fmt.Errorf("prompt_tokens not strictly increasing with prompt length: %s (answers mixed up?)", strings.Join(got, ", "))
		}
		prev = pt
		if o.r.ID != "" {
			if ids[o.r.ID] {
				return "", fmt.Errorf("two concurrent answers share id %q", o.r.ID)
			}
			ids[o.r.ID] = true
		}
	}
	return "prompt_tokens " + strings.Join(got, " < "), nil
}
