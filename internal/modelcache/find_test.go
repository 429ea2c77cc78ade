package modelcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCachedFile(t *testing.T) {
	cache := t.TempDir()
	const commit = "89abcdef0123456789abcdef0123456789abcdef"
	repo := repoDir(cache, "org/name")
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(refPath(repo, "main"), commit+"\n")
	write(blobPath(repo, "b1"), "{}")
	if err := os.MkdirAll(snapshotDir(repo, commit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../blobs/b1", snapshotFile(repo, commit, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "models--org--name", "snapshots", commit, "tokenizer.json")
	for _, c := range []struct {
		model, rev, path string
		ok               bool
	}{
		{"org/name", "", "tokenizer.json", true},
		{"org/name", commit, "tokenizer.json", true}, // a commit is its own ref
		{"org/name", "main", "config.json", false},   // not in the snapshot
		{"org/name", "dev", "tokenizer.json", false}, // no such ref
		{"org/other", "", "tokenizer.json", false},   // not cached
		{"my-served-alias:latest", "", "tokenizer.json", false},
		{"org/name", "", "../../refs/main", false},
	} {
		got, ok, err := CachedFile(cache, c.model, c.rev, c.path)
		if err != nil || ok != c.ok || (ok && got != want) {
			t.Errorf("CachedFile(%q, %q, %q) = %q, %v, %v; want ok %v (%s)", c.model, c.rev, c.path, got, ok, err, c.ok, want)
		}
	}
	// Tokenizer: the load generator's tokenizer.json, in the given cache or the default one.
	if p, err := Tokenizer(cache, "org/name"); p != want || err != nil {
		t.Errorf("Tokenizer = %q, %v; want %q", p, err, want)
	}
	t.Setenv("HF_HUB_CACHE", cache)
	if p, err := Tokenizer("", "org/name"); p != want || err != nil {
		t.Errorf("Tokenizer in the default cache = %q, %v; want %q", p, err, want)
	}
	if p, err := Tokenizer(cache, "org/other"); p != "" || err != nil {
		t.Errorf("Tokenizer of an uncached model = %q, %v; want none", p, err)
	}
	write(refPath(repo, "main"), "not-a-commit")
	if _, ok, err := CachedFile(cache, "org/name", "main", "tokenizer.json"); ok || err == nil || !strings.Contains(err.Error(), "refs") {
		t.Errorf("corrupt ref: ok %v err %v; want an error naming the ref", ok, err)
	}
}
