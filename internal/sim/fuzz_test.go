package sim

import (
	"strings"
	"testing"
)

func FuzzParseGenRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hello","max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"min_tokens":2,"ignore_eos":true,"temperature":0.7,"seed":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`,
		`{"prompt":[1,2,3],"max_completion_tokens":5}`, `{"prompt":[[1,2]]}`, `{"prompt":["x","y"]}`,
		`{"prompt":"x","max_tokens":-1}`, `{"prompt":null}`, `{"prompt":""}`, `{"prompt":[[]]}`, `[]`, `{"n":2,"prompt":"x"}`, `{`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		const maxLen = 256
		r, e := parseGenRequest(body, chat, maxLen)
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if !chat && r.promptToks < 1 {
			t.Fatalf("accepted a completion with an empty prompt")
		}
		if r.maxTokens < 1 || r.promptToks+r.maxTokens > maxLen || r.MinTokens > r.maxTokens || r.MinTokens < 0 || r.temperature < 0 {
			t.Fatalf("accepted an impossible request: prompt %d max %d min %d temp %v", r.promptToks, r.maxTokens, r.MinTokens, r.temperature)
		}
		if r.promptText != "" && Count(r.promptText) != r.promptToks {
			t.Fatalf("prompt tokens %d, text counts %d", r.promptToks, Count(r.promptText))
		}
	})
}

func FuzzParseTokenizeRequest(f *testing.F) {
	for _, s := range []string{`{"prompt":"x"}`, `{"messages":[{"role":"user","content":"x"}]}`, `{"prompt":"x","messages":[]}`, `{}`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, text, e := parseTokenizeRequest(body)
		if e != nil && e.Status != 400 {
			t.Fatalf("status %d", e.Status)
		}
		if e == nil {
			tk := newTokenizer(151936)
			if len(tk.Tokenize(text)) != Count(text) {
				t.Fatal("Tokenize and Count disagree")
			}
		}
	})
}

// The tokenizer loses nothing: pieces concatenate back to the text, each at most 4 bytes, and
// detokenize(tokenize(x)) == x.
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"", "hello world", "  spaced  out ", "ünïcode ✓", strings.Repeat("x", 17)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var b strings.Builder
		pieces(text, func(p string) {
			if len(p) == 0 || len(p) > maxPiece {
				t.Fatalf("piece %q", p)
			}
			b.WriteString(p)
		})
		if b.String() != text {
			t.Fatalf("pieces of %q rebuild %q", text, b.String())
		}
		tk := newTokenizer(151936)
		ids := tk.Tokenize(text)
		back, err := tk.Detokenize(ids)
		// Hash collisions between different pieces are possible in a 151,936-id space; only check
		// when the pieces are few.
		if err != nil || (len(ids) < 8 && back != text && !collides(tk, text)) {
			t.Fatalf("detokenize(tokenize(%q)) = %q, %v", text, back, err)
		}
	})
}

func collides(tk *tokenizer, text string) bool {
	seen := map[int]string{}
	hit := false
	pieces(text, func(p string) {
		id := tk.id(p)
		if q, ok := seen[id]; ok && q != p {
			hit = true
		}
		seen[id] = p
	})
	for _, w := range outputWords {
		if q, ok := seen[tk.id(w)]; ok && q != w {
			hit = true
		}
	}
	return hit
}

func TestOutputWordsAreOneToken(t *testing.T) {
	for _, w := range outputWords {
		if Count(w) != 1 || len(w) > maxPiece {
			t.Fatalf("output word %q is %d tokens", w, Count(w))
		}
	}
	if Count(outputWords[wordIndex(1, 1)]+outputWords[wordIndex(1, 2)]+outputWords[wordIndex(1, 3)]) != 3 {
		t.Fatal("generated words must re-tokenize one by one")
	}
}
