package ssh

import (
	"archive/tar"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tarOf(entries ...[2]string) []byte {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg}
		if e[1] == "/" {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		_ = w.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			_, _ = w.Write([]byte(e[1]))
		}
	}
	_ = w.Close()
	return b.Bytes()
}

// What a host sends back is hostile: whatever the tar stream holds, untar writes nothing outside
// its folder and never panics.
func FuzzUntar(f *testing.F) {
	f.Add(tarOf([2]string{"./summary.json", "{}"}, [2]string{"logs", "/"}, [2]string{"logs/engine-0.log", "x"}))
	f.Add(tarOf([2]string{"../escape", "x"}))
	f.Add(tarOf([2]string{"/etc/escape", "x"}))
	f.Add(tarOf([2]string{"a/../../escape", "x"}))
	f.Add(tarOf([2]string{"a", "x"}, [2]string{"a/b", "x"}))
	f.Add([]byte("not a tar at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "out")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = untar(bytes.NewReader(b), dir, 1<<20)
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != "out" {
			t.Fatalf("untar wrote outside its folder: %v", ents)
		}
	})
}

// A manifest's host is read back without panicking, and what is accepted names a port.
func FuzzParseAddress(f *testing.F) {
	f.Add("root@10.0.0.1:22")
	f.Add("u@[::1]:2222")
	f.Add("@:")
	f.Add("u@h:99999999999999999999")
	f.Fuzz(func(t *testing.T, a string) {
		tg, err := ParseAddress(a)
		if err == nil && Address(tg) == "" {
			t.Fatalf("%q accepted as %+v", a, tg)
		}
	})
}

// A host's results stop at what the disk can spare: the file that crosses the budget is removed
// and the error says what to do; at the budget they are whole. A stream of empty entries stops at
// maxUntarEntries.
func TestUntarBounded(t *testing.T) {
	stream := tarOf([2]string{"summary.json", strings.Repeat("x", 600)}, [2]string{"logs", "/"}, [2]string{"logs/engine-0.log", strings.Repeat("y", 400)})
	for _, c := range []struct {
		budget  int64
		wantErr string
	}{{1000, ""}, {999, "more than the disk under"}} {
		dir := t.TempDir()
		err := untar(bytes.NewReader(stream), dir, c.budget)
		if (err == nil) != (c.wantErr == "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("budget %d: %v, want %q", c.budget, err, c.wantErr)
		}
		_, statErr := os.Stat(filepath.Join(dir, "logs", "engine-0.log"))
		if got := statErr == nil; got != (c.wantErr == "") {
			t.Errorf("budget %d: the crossing file kept: %v", c.budget, got)
		}
	}
	defer func(n int) { maxUntarEntries = n }(maxUntarEntries)
	maxUntarEntries = 2
	if err := untar(bytes.NewReader(stream), t.TempDir(), 1<<20); err == nil || !strings.Contains(err.Error(), "more than 2 files and folders") {
		t.Errorf("three entries past a bound of 2: %v", err)
	}
	if b := untarBudget(t.TempDir()); b < 0 || b == math.MaxInt64 {
		t.Errorf("the budget of a real folder: %d", b)
	}
}
