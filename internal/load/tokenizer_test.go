package load

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/testwait"
)

// TestMain points the hub cache at an empty folder, so the runs here never find a real tokenizer.json
// of testModel in this machine's cache.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpuvet-load-hub")
	if err != nil {
		panic(err)
	}
	os.Setenv("HF_HUB_CACHE", dir)
	testwait.Parallel(5) // the parallel tests wait on slow simulated engines, a few percent of a core each
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// words-bpe.json (made by internal/dataset's fixture test) holds ~120 common words as one token after
// a space; a bare "the", which opens every prompt, is three. The fake counts one token per word plus
// its chat template overhead, so the server counts overhead − 2 tokens beyond the local file.
const wordsTokenizer = "testdata/words-bpe.json"

func TestLocalTokenizerMakesExactLengths(t *testing.T) {
	cases := []struct {
		name, api  string
		noTokenize bool
		want       string
	}{
		{"chat, template by /tokenize", "chat", false, "tokenizer.json (testdata/words-bpe.json); chat template +7 tokens by server /tokenize"},
		{"chat, template by usage", "chat", true, "tokenizer.json (testdata/words-bpe.json); chat template +7 tokens by usage.prompt_tokens"},
		{"completions", "completions", false, "tokenizer.json (testdata/words-bpe.json); -2 special tokens by server /tokenize"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "continuous", overhead: 9, noTokenize: c.noTokenize}
			s := f.start(t)
			o := opts(s.URL, results.LoadConfig{Profile: "concurrency", API: c.api, Concurrency: 4, MaxRequests: 20,
				PromptTokens: 300, PromptStdev: 60, PromptMin: 100, PromptMax: 500})
			o.TokenizerPath = wordsTokenizer
			o.RecordsPath = filepath.Join(t.TempDir(), "records.jsonl")
			l, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if l.TokenCounts != c.want {
				t.Errorf("TokenCounts %q, want %q", l.TokenCounts, c.want)
			}
			// Lengths vary (stdev 60) and each is exact: the server's usage count of prompt i is the
			// length drawn for i.
			lengths := dataset.Synthetic{Lengths: dataset.Lengths{Mean: 300, Stdev: 60, Min: 100, Max: 500}, Seed: uint64(l.Config.Seed)}
			raw, err := os.ReadFile(o.RecordsPath)
			if err != nil {
				t.Fatal(err)
			}
			n, distinct := 0, map[int]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				var r Record
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatal(err)
				}
				if want := lengths.Length(r.Index); r.PromptTokens != want {
					t.Errorf("prompt %d: the server counted %d tokens, want %d", r.Index, r.PromptTokens, want)
				}
				n++
				distinct[r.PromptTokens] = true
			}
			if n < 20 || len(distinct) < 5 {
				t.Errorf("%d records with %d distinct lengths: want ≥ 20 and varied", n, len(distinct))
			}
		})
	}
}

// The tokenizer.json the caller found in the model cache sizes the prompts; one this build cannot
// read is logged and left to the server, not fatal.
func TestCachedTokenizer(t *testing.T) {
	data, err := os.ReadFile(wordsTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	cached := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(cached, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "continuous", overhead: 9}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "synchronous", MaxRequests: 3, PromptTokens: 200})
	o.CachedTokenizer = cached
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := "tokenizer.json (" + cached + ")"
	if !strings.HasPrefix(l.TokenCounts, want) || l.Runs[0].MeanPromptTokens != 200 {
		t.Errorf("TokenCounts %q (want it to start %q), mean prompt %v", l.TokenCounts, want, l.Runs[0].MeanPromptTokens)
	}
	os.WriteFile(cached, []byte(`{"model":{"type":"Unigram"}}`), 0o644)
	var log strings.Builder
	o.Log = &log
	l, err = Run(context.Background(), o)
	if err != nil || l.TokenCounts != tokensServer || !strings.Contains(log.String(), `model.type "Unigram"`) {
		t.Errorf("unreadable cached tokenizer: %v, counts %q, log %q", err, l.TokenCounts, log.String())
	}
}

func TestBadTokenizerFileIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(p, []byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`), 0o644)
	f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "continuous"}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "synchronous", MaxRequests: 2})
	o.TokenizerPath = p
	l, err := Run(context.Background(), o)
	if l != nil || err == nil || !strings.Contains(err.Error(), "--tokenizer") || !strings.Contains(err.Error(), "model.vocab") {
		t.Fatalf("Run with a broken --tokenizer = %v, %v; want an error naming the flag and the field", l, err)
	}
}

// perWord counts one token per word, two for "the": not words-bpe.json plus a constant (the prompts
// hold different numbers of "the"), as a server serving another model would.
type perWord struct{ fail bool }

func (c perWord) Count(_ context.Context, text string) (int, error) {
	if c.fail {
		return 0, errors.New("HTTP 404")
	}
	n := 0
	for _, w := range strings.Fields(text) {
		n++
		if w == "the" {
			n++
		}
	}
	return n, nil
}

func TestLocalTokenizerFallbacks(t *testing.T) {
	local, err := dataset.LoadTokenizer(wordsTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults(results.LoadConfig{PromptTokens: 200})
	var log strings.Builder
	// The server answers but disagrees: the local file is not used, the server's /tokenize is.
	src, counts, err := prompts(context.Background(), cfg, 0, local, perWord{}, perWord{}, &log)
	if err != nil || counts != tokensServer || !strings.Contains(log.String(), "not the served model's tokenizer") {
		t.Errorf("mismatched server: counts %q, err %v, log %q", counts, err, log.String())
	}
	if p := src.Prompt(0); p.Tokens != 200 {
		t.Errorf("prompt 0 Tokens %d, want 200", p.Tokens)
	}
	// No count from the server at all: chat prompts are sized without the template, and say so.
	_, counts, err = prompts(context.Background(), cfg, 0, local, perWord{fail: true}, perWord{fail: true}, io.Discard)
	if err != nil || !strings.HasSuffix(counts, "chat template not counted (the server gave no count)") {
		t.Errorf("no server count (chat): %q, %v", counts, err)
	}
	cfg.API = "completions"
	src, counts, err = prompts(context.Background(), cfg, 0, local, perWord{fail: true}, perWord{fail: true}, io.Discard)
	if err != nil || counts != "tokenizer.json (testdata/words-bpe.json); special tokens from its post_processor, unchecked" || src.Prompt(3).Tokens == 0 {
		t.Errorf("no server count (completions): %q, %v", counts, err)
	}
}
