package modelcache

import (
	"strings"
	"testing"
)

// Non-ASCII file names match their own glob; an invalid byte is a clear pattern error (the fuzz
// crasher "\x80").
func TestGlobNonASCII(t *testing.T) {
	for _, tc := range []struct {
		pat, path string
		want      bool
	}{
		{"é.txt", "é.txt", true},
		{"é.txt", "e.txt", false},
		{"*é*", "sub/café.json", true},
		{"caf?.json", "café.json", true},
		{"[éè].md", "è.md", true},
		{"模型/", "模型/weights.safetensors", true},
		{"a.txt", "a.\x80txt", false},
	} {
		g, err := compileGlobs([]string{tc.pat})
		if err != nil {
			t.Fatalf("%q: %v", tc.pat, err)
		}
		if got := g.match(tc.path); got != tc.want {
			t.Errorf("%q vs %q: %v, want %v", tc.pat, tc.path, got, tc.want)
		}
	}
	if _, err := compileGlobs([]string{"\x80"}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf(`pattern "\x80": %v, want a UTF-8 error`, err)
	}
}
