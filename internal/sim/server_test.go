package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func fixedCfg() Config {
	return Config{Model: "any/model-name", TTFT: 50 * time.Millisecond, ITL: 10 * time.Millisecond, Seed: 1}
}

func TestCompletionStream(t *testing.T) {
	s := start(t, fixedCfg())
	r := streamReq(t, s.URL()+"/v1/completions", map[string]any{"model": "any/model-name", "prompt": "hello there world",
		"max_tokens": 20, "ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	if r.status != 200 || !r.done || r.err != nil {
		t.Fatalf("status %d done %v err %v", r.status, r.done, r.err)
	}
	ce := r.contentEvents()
	if len(ce) != 20 {
		t.Fatalf("%d content chunks, want 20", len(ce))
	}
	for i, e := range ce {
		c := e.obj["choices"].([]any)[0].(map[string]any)
		want := any(nil)
		if i == 19 {
			want = "length"
		}
		if c["finish_reason"] != want || e.obj["object"] != "text_completion" {
			t.Errorf("chunk %d: finish_reason %v object %v", i, c["finish_reason"], e.obj["object"])
		}
	}
	last := r.events[len(r.events)-1].obj
	u, _ := last["usage"].(map[string]any)
	if len(last["choices"].([]any)) != 0 || u == nil || u["completion_tokens"] != 20.0 || u["prompt_tokens"] != float64(Count("hello there world")) {
		t.Errorf("usage chunk %v", last)
	}
	// Fixed mode: the first token no earlier than TTFT, the last no earlier than TTFT + 19 ITL.
	if ce[0].at < 50*time.Millisecond || ce[19].at < 240*time.Millisecond {
		t.Errorf("first token at %v (want ≥ 50ms), last at %v (want ≥ 240ms)", ce[0].at, ce[19].at)
	}
}

func TestChatStreamContinuousUsage(t *testing.T) {
	s := start(t, fixedCfg())
	r := streamReq(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "any/model-name",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 5, "ignore_eos": true, "stream": true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}})
	if !r.done || len(r.events) != 7 { // role + 5 tokens + usage
		t.Fatalf("done %v, %d events: %v", r.done, len(r.events), r.events)
	}
	role := r.events[0].obj["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	if role["role"] != "assistant" || role["content"] != "" {
		t.Errorf("first chunk should carry the role only, got %v", role)
	}
	for k := 1; k <= 5; k++ {
		u := r.events[k].obj["usage"].(map[string]any)
		if u["completion_tokens"] != float64(k) {
			t.Errorf("chunk %d: continuous usage completion_tokens %v", k, u["completion_tokens"])
		}
		if r.events[k].obj["object"] != "chat.completion.chunk" {
			t.Errorf("object %v", r.events[k].obj["object"])
		}
	}
}

func TestNonStreamAndTokenize(t *testing.T) {
	s := start(t, fixedCfg())
	msgs := []any{map[string]any{"role": "system", "content": "be brief"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "what is a GPU?"}}}}
	for _, c := range []struct {
		path string
		body map[string]any
		tok  map[string]any
	}{
		{"/v1/completions", map[string]any{"prompt": "The quick brown fox jumps", "max_tokens": 12, "ignore_eos": true},
			map[string]any{"prompt": "The quick brown fox jumps"}},
		{"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 12, "ignore_eos": true},
			map[string]any{"messages": msgs}},
	} {
		resp, body := post(t, s.URL()+c.path, c.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		var out struct {
			Choices []struct {
				Text         string
				Message      struct{ Role, Content string }
				FinishReason string `json:"finish_reason"`
			}
			Usage struct{ PromptTokens, CompletionTokens, TotalTokens int } `json:"usage"`
		}
		// usage keys are snake_case
		var raw map[string]any
		json.Unmarshal(body, &raw)
		json.Unmarshal(body, &out)
		u := raw["usage"].(map[string]any)
		text := out.Choices[0].Text + out.Choices[0].Message.Content
		if u["completion_tokens"] != 12.0 || Count(text) != 12 || out.Choices[0].FinishReason != "length" {
			t.Errorf("%s: usage %v, text %q (%d tokens), finish %q", c.path, u, text, Count(text), out.Choices[0].FinishReason)
		}
		_, tb := post(t, s.URL()+"/tokenize", c.tok)
		var tr struct {
			Count  int
			Tokens []int
		}
		json.Unmarshal(tb, &tr)
		if float64(tr.Count) != u["prompt_tokens"] || len(tr.Tokens) != tr.Count {
			t.Errorf("%s: /tokenize count %d, usage.prompt_tokens %v", c.path, tr.Count, u["prompt_tokens"])
		}
	}
	// detokenize reverses tokenize.
	text := "Detokenize me, please: 12345 ünïcode"
	_, tb := post(t, s.URL()+"/tokenize", map[string]any{"prompt": text})
	var tr struct{ Tokens []int }
	json.Unmarshal(tb, &tr)
	_, db := post(t, s.URL()+"/detokenize", map[string]any{"tokens": tr.Tokens})
	var dr struct{ Prompt string }
	json.Unmarshal(db, &dr)
	if dr.Prompt != text {
		t.Errorf("detokenize(tokenize(%q)) = %q", text, dr.Prompt)
	}
}

func TestErrors(t *testing.T) {
	s := start(t, Config{Model: "m", TTFT: time.Millisecond, ITL: time.Millisecond, Engine: EngineConfig{MaxModelLen: 100}})
	long := strings.Repeat("word ", 90)
	cases := []struct {
		name, path string
		body       string
		status     int
		typ, msg   string
	}{
		{"unknown model", "/v1/completions", `{"model":"nope","prompt":"x"}`, 404, "NotFoundError", "The model `nope` does not exist."},
		{"context overflow", "/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":50}`, long), 400, "BadRequestError", "maximum context length is 100 tokens"},
		{"prompt too long", "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, strings.Repeat(long, 2)), 400, "BadRequestError", "maximum context length"},
		{"bad json", "/v1/completions", `{"model":`, 400, "BadRequestError", "invalid JSON"},
		{"no messages", "/v1/chat/completions", `{"model":"m"}`, 400, "BadRequestError", "messages: required"},
		{"n=2", "/v1/completions", `{"prompt":"x","n":2}`, 400, "BadRequestError", "n:"},
		{"max_tokens 0", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "BadRequestError", "max_tokens"},
		{"min > max", "/v1/completions", `{"prompt":"x","max_tokens":3,"min_tokens":5}`, 400, "BadRequestError", "min_tokens"},
		{"tokenize unknown model", "/tokenize", `{"model":"nope","prompt":"x"}`, 404, "NotFoundError", "nope"},
		{"detokenize out of vocab", "/detokenize", `{"tokens":[99999999]}`, 400, "BadRequestError", "out of vocabulary"},
	}
	for _, c := range cases {
		resp, err := http.Post(s.URL()+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message, Type string
				Code          int
			}
		}
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || e.Error.Type != c.typ || e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %+v, want %d %s containing %q", c.name, resp.StatusCode, e.Error, c.status, c.typ, c.msg)
		}
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	s := start(t, fixedCfg())
	resp, body := getBody(t, s.URL()+"/v1/models")
	var m struct {
		Object string
		Data   []struct {
			ID          string
			MaxModelLen int `json:"max_model_len"`
		}
	}
	json.Unmarshal(body, &m)
	if resp.StatusCode != 200 || m.Object != "list" || len(m.Data) != 1 || m.Data[0].ID != "any/model-name" || m.Data[0].MaxModelLen == 0 {
		t.Errorf("/v1/models: %s", body)
	}
	if resp, _ := getBody(t, s.URL()+"/health"); resp.StatusCode != 200 {
		t.Errorf("/health %d", resp.StatusCode)
	}
	for range 3 {
		post(t, s.URL()+"/v1/completions", map[string]any{"prompt": "one two three", "max_tokens": 4, "ignore_eos": true})
	}
	_, mb := getBody(t, s.URL()+"/metrics")
	for _, want := range []string{
		`vllm:num_requests_running{engine="0",model_name="any/model-name"} 0`,
		`vllm:num_requests_waiting{`, `vllm:kv_cache_usage_perc{`,
		fmt.Sprintf(`vllm:prompt_tokens_total{engine="0",model_name="any/model-name"} %d`, 3*Count("one two three")),
		`vllm:generation_tokens_total{engine="0",model_name="any/model-name"} 12`,
		`vllm:time_to_first_token_seconds_count{engine="0",model_name="any/model-name"} 3`,
		`vllm:inter_token_latency_seconds_bucket{`, `vllm:e2e_request_latency_seconds_count{engine="0",model_name="any/model-name"} 3`,
		`vllm:request_success_total{engine="0",model_name="any/model-name",finished_reason="length"} 3`,
	} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func getBody(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, []byte(b.String())
}

func TestLengthsAndDeterminism(t *testing.T) {
	fast := Config{Model: "any/model-name", TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Seed: 1}
	a := start(t, fast)
	b := start(t, fast)
	fast.Seed = 2
	other := start(t, fast)
	fast.Seed = 1
	text := func(s *Server, body map[string]any) (string, string, int) {
		_, out := post(t, s.URL()+"/v1/completions", body)
		var r struct {
			Choices []struct {
				Text         string
				FinishReason string `json:"finish_reason"`
			}
			Usage map[string]int
		}
		json.Unmarshal(out, &r)
		return r.Choices[0].Text, r.Choices[0].FinishReason, r.Usage["completion_tokens"]
	}
	// Without ignore_eos the model stops on its own before a large max_tokens.
	_, fin, n := text(a, map[string]any{"prompt": "tell me", "max_tokens": 2000})
	if fin != "stop" || n >= 2000 || n < 1 {
		t.Errorf("natural stop: finish %q after %d tokens", fin, n)
	}
	_, fin, n = text(a, map[string]any{"prompt": "tell me", "max_tokens": 2000, "min_tokens": 1500})
	if n < 1500 || fin != "stop" {
		t.Errorf("min_tokens 1500: %d tokens, finish %q", n, fin)
	}
	// Greedy and seeded requests repeat exactly; the same server seed repeats unseeded sampling too.
	greedy := map[string]any{"prompt": "same prompt", "max_tokens": 8, "temperature": 0}
	seeded := map[string]any{"prompt": "same prompt", "max_tokens": 8, "temperature": 0.8, "seed": 7}
	g1, _, _ := text(a, greedy)
	g2, _, _ := text(other, greedy)
	s1, _, _ := text(a, seeded)
	s2, _, _ := text(other, seeded)
	if g1 != g2 || s1 != s2 || g1 == s1 {
		t.Errorf("greedy %q / %q, seeded %q / %q", g1, g2, s1, s2)
	}
	u1, _, _ := text(b, map[string]any{"prompt": "sample", "max_tokens": 8})
	u2, _, _ := text(other, map[string]any{"prompt": "sample", "max_tokens": 8})
	// a and b have the same seed but a has served more requests; compare b's first against a fresh one.
	c := start(t, fast)
	u3, _, _ := text(c, map[string]any{"prompt": "sample", "max_tokens": 8})
	if u1 != u3 || u1 == u2 {
		t.Errorf("unseeded sampling: seed 1 gave %q and %q, seed 2 gave %q", u1, u3, u2)
	}
}
