package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSimBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	badCat := filepath.Join(dir, "cat.yaml")
	os.WriteFile(badCat, []byte("models:\n  - id: x/y\n    layers: 0\n    params: 1\n"), 0o644)
	for _, args := range [][]string{
		{"sim", "--gpu", "H999", "--model", "Qwen/Qwen3-8B", "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "no/such-model", "--port", "0"},
		{"sim", "--gpu", "H100", "--port", "0"},
		{"sim", "--model", "Qwen/Qwen3-8B", "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--fault-5xx", "2", "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--gpus", "3", "--tp", "2", "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--catalog", badCat, "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--catalog", filepath.Join(dir, "missing.yaml"), "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--itl", "ten", "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--straggler", "4", "--port", "0"},
		{"sim", "--gpu", "H100", "--model", "Qwen/Qwen3-8B", "--trace", filepath.Join(dir, "no", "dir", "t.jsonl"), "--port", "0"},
	} {
		if code := execute(args); code != exitBadUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
