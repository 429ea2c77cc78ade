package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bench finds the model's tokenizer.json in the hub cache and hands it to the load generator.
func TestBenchUsesCachedTokenizer(t *testing.T) {
	cache := t.TempDir()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	repo := filepath.Join(cache, "models--org--m")
	snap := filepath.Join(repo, "snapshots", commit)
	data, err := os.ReadFile("../../internal/load/testdata/words-bpe.json")
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string][]byte{filepath.Join(repo, "refs", "main"): []byte(commit), filepath.Join(snap, "tokenizer.json"): data} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HF_HUB_CACHE", cache)
	s := miniServerOf(t, "org/m")
	out := filepath.Join(t.TempDir(), "r.json")
	if code := execute([]string{"bench", "--url", s.URL, "--model", "org/m", "--profile", "synchronous", "--max-requests", "2",
		"--prompt-tokens", "32", "--output-tokens", "4", "--out", out, "--no-metrics"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if l := readLoad(t, out); !strings.HasPrefix(l.TokenCounts, "tokenizer.json ("+filepath.Join(snap, "tokenizer.json")+")") {
		t.Errorf("TokenCounts %q: want the cached tokenizer.json", l.TokenCounts)
	}
}
