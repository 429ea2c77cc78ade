package fleet

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// A killed run's manifest is its document and its journal: a second gpuvet reads both back, the
// objects recorded and deleted since the document was written included.
func TestManifestJournalReadBack(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManifest(dir, "kubernetes", "r1", map[string]string{"context": "local"})
	if err != nil {
		t.Fatal(err)
	}
	a := Object{Kind: "Pod", Namespace: "ns", Name: "a", Host: "n1"}
	b := Object{Kind: "Pod", Namespace: "ns", Name: "b", Host: "n1"}
	for _, o := range []Object{a, b} {
		if err := m.Record(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Deleted(a); err != nil {
		t.Fatal(err)
	}
	if err := m.Record(a); err != nil { // created again: live again
		t.Fatal(err)
	}
	if err := m.Deleted(b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadManifest(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	if l := back.Live(); len(l) != 1 || !l[0].same(a) || len(back.Objects) != 2 || back.Target["context"] != "local" {
		t.Errorf("read back: live %v, objects %v", l, back.Objects)
	}
	// clean goes on from what it read: its deletions reach the same files.
	if err := back.Deleted(a); err != nil {
		t.Fatal(err)
	}
	if again, err := ReadManifest(m.Path()); err != nil || len(again.Live()) != 0 {
		t.Errorf("after clean's deletion: %v, live %v", err, again.Live())
	}
	if err := back.Finish(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left after a clean finish: %v", left)
	}
}

// A line cut short by a machine that stopped during the write is a change that never happened (its
// object was never created); a broken line before the end is an error naming it.
func TestManifestJournalCutShort(t *testing.T) {
	m, err := NewManifest(t.TempDir(), "kubernetes", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Record(Object{Kind: "Namespace", Name: "gpuvet-r1"}); err != nil {
		t.Fatal(err)
	}
	jp := journalPath(m.Path())
	appendTo(t, jp, `{"record":{"kind":"Pod","name":"hal`)
	back, err := ReadManifest(m.Path())
	if err != nil || len(back.Live()) != 1 {
		t.Fatalf("a last line cut short: %v, live %v", err, back.Live())
	}
	// clean's next change follows a whole line, not the half one.
	if err := back.Record(Object{Kind: "Pod", Namespace: "gpuvet-r1", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if again, err := ReadManifest(m.Path()); err != nil || len(again.Live()) != 2 {
		t.Fatalf("after a change appended to a cut journal: %v, live %v", err, again.Live())
	}
	appendTo(t, jp, "{\"nothing\":1}\n{\"deleted\":[{\"kind\":\"Pod\",\"name\":\"x\"}]}\n")
	if _, err := ReadManifest(m.Path()); err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), jp) {
		t.Errorf("a broken line in the middle: %v", err)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// FuzzManifestJournal: any journal beside a valid document reads back or fails with an error, and
// never panics.
func FuzzManifestJournal(f *testing.F) {
	f.Add([]byte(`{"record":{"kind":"Pod","name":"a","namespace":"ns"}}` + "\n" + `{"deleted":[{"kind":"Pod","name":"a","namespace":"ns"}]}` + "\n"))
	f.Add([]byte(`{"record":null}` + "\n" + `{"deleted":[]}`))
	f.Add([]byte("\n\n{\"record\":{\"kind\":\"\"}}"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, journal []byte) {
		m, err := NewManifest(dir, "kubernetes", "fuzz", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(journalPath(m.Path()), journal, 0o644); err != nil {
			t.Fatal(err)
		}
		if back, err := ReadManifest(m.Path()); err == nil {
			_ = back.Live()
		}
	})
}

// BenchmarkManifestRecord records one object into a manifest that already holds n: its cost must
// not grow with n (a 1,000-node Kubernetes run records ~42,000 objects; rewriting the whole
// manifest on each record made the run's cost grow with their square).
func BenchmarkManifestRecord(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("holding-%d", n), func(b *testing.B) {
			m, err := NewManifest(b.TempDir(), "kubernetes", "bench", nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if err := m.Record(Object{Kind: "Job", Namespace: "ns", Name: fmt.Sprintf("pre-%d", i), Host: "n"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := m.Record(Object{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p-%d", i), Host: "n"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
