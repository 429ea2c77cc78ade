package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// How prompt lengths were made exact (results.Load.TokenCounts).
const (
	tokensLocal  = "tokenizer.json"
	tokensServer = "server /tokenize"
	tokensUsage  = "usage-calibrated"
	tokensFile   = "from the file (lengths as the server's usage counts them)"
)

// serverCounter counts tokens with the server's /tokenize, as the server counts (chat template included).
type serverCounter struct {
	url, model, key string
	chat            bool
	hc              *http.Client
}

// body is a request about text: a user message for chat, else a prompt.
func (c *serverCounter) body(text string) map[string]any {
	if c.chat {
		return map[string]any{"model": c.model, "messages": []message{{Role: "user", Content: text}}}
	}
	return map[string]any{"model": c.model, "prompt": text}
}

func (c *serverCounter) Count(ctx context.Context, text string) (int, error) {
	var out struct {
		Count  *int  `json:"count"`
		Tokens []int `json:"tokens"`
	}
	if err := postJSON(ctx, c.hc, c.url, c.key, c.body(text), &out); err != nil {
		return 0, err
	}
	switch {
	case out.Count != nil:
		return *out.Count, nil
	case out.Tokens != nil:
		return len(out.Tokens), nil
	}
	return 0, fmt.Errorf("POST %s: answer has neither \"count\" nor \"tokens\"", results.RedactURLs(c.url))
}

// usageCounter counts by usage.prompt_tokens of a one-token completion: without /tokenize.
type usageCounter serverCounter

func (c *usageCounter) Count(ctx context.Context, text string) (int, error) {
	body := (*serverCounter)(c).body(text)
	body["max_tokens"], body["stream"] = 1, false
	var out struct {
		Usage *usage `json:"usage"`
	}
	if err := postJSON(ctx, c.hc, c.url, c.key, body, &out); err != nil {
		return 0, err
	}
	if out.Usage == nil || out.Usage.PromptTokens <= 0 {
		return 0, fmt.Errorf("POST %s: no usage.prompt_tokens in the answer: cannot calibrate prompt lengths", results.RedactURLs(c.url))
	}
	return out.Usage.PromptTokens, nil
}

// postJSON posts body and decodes a 200 answer into out; any other status is an error quoting the body.
func postJSON(ctx context.Context, hc *http.Client, url, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := newRequest(ctx, http.MethodPost, url, key, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("POST %s: %w", results.RedactURLs(url), err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", results.RedactURLs(url), resp.StatusCode, head([]byte(oneLine(redact(string(bytes.TrimSpace(raw)), key))), 200))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("POST %s: answer is not the expected JSON: %w", results.RedactURLs(url), err)
	}
	return nil
}
