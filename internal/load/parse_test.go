package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/gpuvet/gpuvet/internal/dataset"
)

func events(t *testing.T, r io.Reader) ([]string, error) {
	t.Helper()
	s := newSSEReader(r)
	var out []string
	for {
		d, err := s.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(d))
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"plain", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"CRLF and no space", "data:a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"comments and other fields", ": ping\n\nevent: x\nid: 3\ndata: a\n\nretry: 5\n\n", []string{"a"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"blank lines only", "\n\n\n", nil},
		{"field without colon", "data\n\n", []string{""}},
	}
	for _, c := range cases {
		for _, r := range []io.Reader{strings.NewReader(c.in), iotest.OneByteReader(strings.NewReader(c.in))} {
			got, err := events(t, r)
			if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
			}
		}
	}
	long := "data: " + strings.Repeat("x", maxSSELine+10) + "\n\n"
	if _, err := events(t, strings.NewReader(long)); err != errLineTooLong {
		t.Errorf("over-long line: %v", err)
	}
}

func TestParseChunk(t *testing.T) {
	cases := []struct {
		name, in     string
		text         int
		choices      bool
		usage        bool
		finish, errs string
		bad          bool
	}{
		{"role only", `{"choices":[{"delta":{"role":"assistant","content":""}}]}`, 0, true, false, "", "", false},
		{"content", `{"choices":[{"delta":{"content":"hello"}}]}`, 5, true, false, "", "", false},
		{"reasoning", `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, 3, true, false, "", "", false},
		{"completion text", `{"choices":[{"text":"ab","finish_reason":"length"}]}`, 2, true, false, "length", "", false},
		{"usage only", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}`, 0, false, true, "", "", false},
		{"error object", `{"error":{"message":"overloaded","code":503}}`, 0, false, false, "", "overloaded", false},
		{"error string", `{"error":"boom"}`, 0, false, false, "", `"boom"`, false},
		{"null content", `{"choices":[{"delta":{"content":null}}]}`, 0, true, false, "", "", false},
		{"truncated JSON", `{"choices":[{"delta":{"content":"a"`, 0, false, false, "", "", true},
		{"not an object", `[1,2]`, 0, false, false, "", "", true},
		{"negative usage", `{"usage":{"prompt_tokens":-1,"completion_tokens":2}}`, 0, false, false, "", "", true},
		{"content of wrong type", `{"choices":[{"delta":{"content":5}}]}`, 0, false, false, "", "", true},
	}
	for _, c := range cases {
		ch, err := parseChunk([]byte(c.in))
		if (err != nil) != c.bad {
			t.Errorf("%s: err %v, want bad=%v", c.name, err, c.bad)
			continue
		}
		if c.bad {
			continue
		}
		if ch.TextBytes != c.text || ch.HasChoices != c.choices || ch.HasUsage != c.usage || ch.Finish != c.finish || ch.Err != c.errs {
			t.Errorf("%s: %+v", c.name, ch)
		}
	}
}

func TestParseProm(t *testing.T) {
	in := `# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2
vllm:num_requests_waiting{model_name="m",path="a}b"} 7 1700000000000
vllm:kv_cache_usage_perc 0.5
other_metric 9
`
	want := map[string]bool{"vllm:num_requests_running": true, "vllm:num_requests_waiting": true, "vllm:kv_cache_usage_perc": true}
	got, err := parseProm(strings.NewReader(in), want)
	if err != nil {
		t.Fatal(err)
	}
	if got["vllm:num_requests_running"] != 5 || got["vllm:num_requests_waiting"] != 7 || got["vllm:kv_cache_usage_perc"] != 0.5 || len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	// NaN and ±Inf parse as floats, and encoding/json cannot write them: a sample holding one would
	// fail the whole summary.json. 1e308 twice overflows the sum over label sets.
	for _, bad := range []string{"vllm:num_requests_running{a=\"b\" 3\n", "vllm:num_requests_running x\n", "vllm:num_requests_running\n",
		"vllm:kv_cache_usage_perc NaN\n", "vllm:num_requests_waiting +Inf\n", "vllm:num_requests_running -Inf\n",
		"vllm:num_requests_running{a=\"1\"} 1e308\nvllm:num_requests_running{a=\"2\"} 1e308\n"} {
		if _, err := parseProm(strings.NewReader(bad), want); err == nil {
			t.Errorf("parseProm(%q): no error", bad)
		}
	}
}

func TestSplitByBytes(t *testing.T) {
	m := []mark{{bytes: 10}, {bytes: 30}, {bytes: 0}, {bytes: 20}}
	splitByBytes(m, 13)
	sum := 0
	for _, x := range m {
		sum += int(x.tok)
		if x.tok < 0 {
			t.Fatal("negative share")
		}
	}
	if sum != 13 || m[1].tok < m[0].tok {
		t.Fatalf("split %+v", m)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\r\ndata:a\r\ndata:b\r\n\r\n"))
	f.Add([]byte("data"))
	f.Add([]byte("\r\r\n\n:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newSSEReader(bytes.NewReader(b))
		total := 0
		for range len(b) + 2 {
			d, err := s.Next()
			if err != nil {
				return
			}
			total += len(d)
			if total > len(b) {
				t.Fatalf("events carry %d bytes from %d of input", total, len(b))
			}
		}
		t.Fatal("more events than input bytes")
	})
}

func FuzzParseChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`))
	f.Add([]byte(`{"error":{"message":"x"}}`))
	f.Add([]byte(`{"choices":[{"text":"a","finish_reason":"stop"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseChunk(b)
		if err != nil {
			return
		}
		if c.TextBytes < 0 || c.TextBytes > len(b) {
			t.Fatalf("text bytes %d from %d input bytes", c.TextBytes, len(b))
		}
		if c.HasUsage && (c.Usage.PromptTokens < 0 || c.Usage.CompletionTokens < 0) {
			t.Fatalf("negative usage accepted: %+v", c.Usage)
		}
	})
}

func FuzzParseProm(f *testing.F) {
	f.Add([]byte("vllm:num_requests_running{a=\"b\"} 3\n# x\n"))
	f.Add([]byte("vllm:kv_cache_usage_perc NaN\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := map[string]bool{"vllm:num_requests_running": true, "vllm:kv_cache_usage_perc": true}
		got, err := parseProm(bytes.NewReader(b), want)
		if err == nil {
			for k, v := range got {
				if !want[k] {
					t.Fatalf("unwanted metric %q returned", k)
				}
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s = %v returned: not a number JSON can hold", k, v)
				}
			}
		}
	})
}

// FuzzRecordDerive feeds arbitrary streams through the client's finalize/derive path via a fake body.
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"), 1)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":9}}\n\ndata: [DONE]\n\n"), 9)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":5}}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":{\"completion_tokens\":2}}\n\n"), 3)
	f.Fuzz(func(t *testing.T, body []byte, want int) {
		cl := &client{stall: 1e9}
		rec := &Record{RequestedTokens: want}
		ctx, cancel := contextWithCancelCause()
		defer cancel(nil)
		cl.stream(ctx, cancel, bytes.NewReader(body), rec, nil, "")
		rec.derive()
		for _, g := range rec.ITLMs {
			if g < 0 {
				t.Fatalf("negative ITL %v", g)
			}
		}
		if rec.Error == "" && !rec.Incomplete && rec.OutputTokens < want {
			t.Fatalf("short output %d < %d not flagged", rec.OutputTokens, want)
		}
	})
}

func contextWithCancelCause() (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(context.Background())
}

func BenchmarkParseChunk(b *testing.B) {
	c := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":512,"total_tokens":600,"completion_tokens":88}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseChunk(c); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzUsageClaims: whatever usage counts a server claims (continuous or final, any size), and however
// many chunks it sends, no count beyond max_tokens is believed and nothing is sized by a claim: the
// output count, the per-token gaps and the prompt count stay within what was asked and received.
// (Issue 27: a claim of 999,999,999,999,999 tokens once panicked bench in makeslice.)
func FuzzUsageClaims(f *testing.F) {
	f.Add(uint16(4), uint8(4), uint64(999999999999999), uint64(0), uint64(3), false)
	f.Add(uint16(4), uint8(4), uint64(3_000_000_000), uint64(3_000_000_004), uint64(3), true)
	f.Add(uint16(16), uint8(3), uint64(16), uint64(1), uint64(1<<40), true)
	f.Add(uint16(2), uint8(40), uint64(40), uint64(5), uint64(0), false)
	f.Fuzz(func(t *testing.T, asked uint16, chunks uint8, final, step, prompt uint64, continuous bool) {
		var body bytes.Buffer
		for k := range uint64(chunks) {
			u := ""
			if continuous {
				u = fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d}`, prompt, (k+1)*step)
			}
			fmt.Fprintf(&body, "data: {\"choices\":[{\"text\":\"ab\",\"finish_reason\":null}]%s}\n\n", u)
		}
		fmt.Fprintf(&body, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", prompt, final)
		cl := &client{stall: time.Hour, epoch: time.Now()}
		rec := &Record{RequestedTokens: int(asked), promptBytes: 10, marks: make([]mark, 0, 4)}
		ctx, cancel := contextWithCancelCause()
		defer cancel(nil)
		cl.stream(ctx, cancel, bytes.NewReader(body.Bytes()), rec, nil, "text/event-stream")
		rec.derive()
		bound := max(int(asked), len(rec.marks))
		if rec.OutputTokens > bound || rec.OutputTokens < 0 {
			t.Fatalf("output %d tokens for max_tokens %d and %d chunks (%s)", rec.OutputTokens, asked, len(rec.marks), rec.Counts)
		}
		if len(rec.ITLMs) > bound || cap(rec.ITLMs) > bound {
			t.Fatalf("%d ITL gaps (cap %d) for max_tokens %d", len(rec.ITLMs), cap(rec.ITLMs), asked)
		}
		sum := 0
		for _, m := range rec.marks {
			if m.tok < 0 {
				t.Fatalf("negative tokens in a chunk: %+v", m)
			}
			sum += int(m.tok)
		}
		if sum > bound {
			t.Fatalf("chunks carry %d tokens for a bound of %d", sum, bound)
		}
		if rec.PromptTokens > 10+templateTokens {
			t.Fatalf("prompt count %d believed for a 10-byte prompt", rec.PromptTokens)
		}
		honest := final <= uint64(asked) && (!continuous || uint64(chunks)*step <= uint64(asked))
		if asked > 0 && !honest && rec.Error == "" && final <= 1e15 && step <= 1e12 {
			t.Fatalf("a claim beyond max_tokens %d passed clean: final %d, continuous %v × %d", asked, final, continuous, step)
		}
	})
}

// historySource is a multi-turn session's later turn: a short new user turn after a long history.
type historySource struct{ history []string }

func (h historySource) Prompt(int) dataset.Prompt {
	return dataset.Prompt{Text: "and now?", History: h.history}
}
func (historySource) Describe() string { return "history" }

// TestPromptClaimCountsTheHistory: a multi-turn request sends its history with its new turn, so the
// server's honest prompt count covers both. The bound on believing it counted the new turn's bytes
// only: past 4,096 tokens of history every later turn's count was disbelieved and its prompt tokens
// read 0 (the record kept the count as usage_prompt_tokens, total tok/s lost the history).
func TestPromptClaimCountsTheHistory(t *testing.T) {
	turn := strings.Repeat("word ", 1500) // 7,500 bytes
	g := &rungState{rn: &runner{src: historySource{history: []string{turn, turn, turn}}}, out: &rungOut{}}
	rec, p, _ := g.newRec(0, 0, 0)
	honest := 3*1500 + len(strings.Fields(p.Text)) + 20 // the words, and a chat template's share
	rec.finalize(&usage{PromptTokens: honest, CompletionTokens: 0})
	if rec.PromptClaim != 0 || rec.PromptTokens != honest {
		t.Fatalf("prompt tokens %d (claim %d kept) for an honest count of %d over the history", rec.PromptTokens, rec.PromptClaim, honest)
	}
}

// TestZeroUsageInEveryChunk: a server that puts a usage object of zeros in every chunk (a placeholder,
// not a running count) and the true count in a closing usage chunk is not counting continuously:
// its chunks are one token each, so ITL keeps its gaps (they all read 0 tokens, and ITL was empty).
func TestZeroUsageInEveryChunk(t *testing.T) {
	var body strings.Builder
	for range 4 {
		body.WriteString(`data: {"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":0,"completion_tokens":0}}` + "\n\n")
	}
	body.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}` + "\n\ndata: [DONE]\n\n")
	cl := &client{stall: 1e9}
	rec := &Record{RequestedTokens: 4}
	ctx, cancel := contextWithCancelCause()
	defer cancel(nil)
	cl.stream(ctx, cancel, strings.NewReader(body.String()), rec, nil, "")
	rec.derive()
	if rec.Error != "" || rec.OutputTokens != 4 || len(rec.ITLMs) != 3 || rec.Counts != countsUsage {
		t.Fatalf("error %q %s, %d output tokens (%s), %d ITL gaps: want 4 tokens and 3 gaps", rec.Error, rec.Detail, rec.OutputTokens, rec.Counts, len(rec.ITLMs))
	}
}
