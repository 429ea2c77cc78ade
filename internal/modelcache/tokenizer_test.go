package modelcache

import (
	"os"
	"path/filepath"
	"testing"
)

// Tokenizer finds the model's tokenizer.json through refs/main as the hub libraries do, in the given
// cache or, given none, in the default one (HF_HUB_CACHE).
func TestTokenizer(t *testing.T) {
	cache := t.TempDir()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	repo := repoDir(cache, "Qwen/Qwen3-8B")
	for p, body := range map[string]string{refPath(repo, "main"): commit, blobPath(repo, "abc"): "{}"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(snapshotDir(repo, commit), 0o755); err != nil {
		t.Fatal(err)
	}
	want := snapshotFile(repo, commit, "tokenizer.json")
	if err := os.Symlink("../../blobs/abc", want); err != nil {
		t.Fatal(err)
	}
	if p, err := Tokenizer(cache, "Qwen/Qwen3-8B"); p != want || err != nil {
		t.Errorf("Tokenizer = %q, %v; want %q", p, err, want)
	}
	t.Setenv("HF_HUB_CACHE", cache)
	if p, err := Tokenizer("", "Qwen/Qwen3-8B"); p != want || err != nil {
		t.Errorf("default cache: Tokenizer = %q, %v; want %q", p, err, want)
	}
	for _, model := range []string{"Qwen/Qwen3-0.6B", "served-alias"} {
		if p, err := Tokenizer(cache, model); p != "" || err != nil {
			t.Errorf("%s: Tokenizer = %q, %v; want none", model, p, err)
		}
	}
}
