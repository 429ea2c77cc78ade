package fleet

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	if l := back.Live(); len(l) != 1 || l[0].key() != a.key() || len(back.Objects) != 2 || back.Target["context"] != "local" {
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
	// 64 nodes recording at once (--parallel-nodes 64): they share the journal's fsyncs.
	b.Run("64-at-once", func(b *testing.B) {
		m, err := NewManifest(b.TempDir(), "kubernetes", "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		b.SetParallelism(64 / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := m.Record(Object{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p-%d", n.Add(1)), Host: "n"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// A manifest is gpuvet's or nothing: without its format marker, of another version, under a name
// that is not its own, or naming objects over their bounds, it is refused.
func TestReadManifestRefusesWhatIsNotGpuvets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ name, doc, want string }{
		{"ssh-r1.json", `{"backend":"ssh","run_id":"r1","objects":[]}`, "no \"format\""},
		{"ssh-r1.json", `{"format":"gpuvet-run-manifest","version":2,"backend":"ssh","run_id":"r1"}`, "version 2"},
		{"summary.json", `{"format":"gpuvet-run-manifest","version":1,"backend":"ssh","run_id":"r1"}`, "its file is ssh-r1.json"},
		{"ssh-..json", `{"format":"gpuvet-run-manifest","version":1,"backend":"ssh","run_id":"."}`, "run id"},
		{"ssh-r1.json", `{"format":"gpuvet-run-manifest","version":1,"backend":"ssh","run_id":"r1","objects":[{"kind":"ssh-dir","name":"` + strings.Repeat("x", 600) + `"}]}`, "more than 512"},
		{"ssh-r1.json", `{"format":"gpuvet-run-manifest","version":1,"backend":"ssh","run_id":"r1","objects":[{"kind":"ssh-dir","name":"a\nremoved everything"}]}`, "control characters"},
	} {
		_, err := ReadManifest(write(c.name, c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 600 {
			t.Errorf("%s %.80s: %v", c.name, c.doc, err)
		}
	}
}

// Deleting thousands of objects at once writes lines under the journal's line bound, and reads back.
func TestManifestDeletedAllLinesBounded(t *testing.T) {
	m, err := NewManifest(t.TempDir(), "kubernetes", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var objs []Object
	for i := range 2000 {
		o := Object{Kind: "Pod", Namespace: strings.Repeat("n", 253), Name: fmt.Sprintf("%0253d", i), Host: strings.Repeat("h", 253)}
		objs = append(objs, o)
		if err := m.Record(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.DeletedAll(objs); err != nil {
		t.Fatal(err)
	}
	if back, err := ReadManifest(m.Path()); err != nil || len(back.Live()) != 0 {
		t.Fatalf("read back: %v", err)
	}
}

// FuzzManifestDocument: any document reads back or fails with an error, never panics, and what
// it reads back is within the bounds every reader relies on.
func FuzzManifestDocument(f *testing.F) {
	f.Add([]byte(`{"format":"gpuvet-run-manifest","version":1,"backend":"ssh","run_id":"fuzz","objects":[{"kind":"ssh-dir","name":"/tmp/x","host":"h"}]}`))
	f.Add([]byte(`{"format":"gpuvet-run-manifest","version":1,"backend":"ssh","run_id":"fuzz","objects":[{"kind":"","name":""}]}`))
	f.Add([]byte(`{"backend":"ssh","run_id":"fuzz"}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, doc []byte) {
		p := ManifestPath(dir, "ssh", "fuzz")
		if err := os.WriteFile(p, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(p)
		if err != nil {
			return
		}
		for _, o := range m.Live() {
			if checkObject(o) != nil {
				t.Fatalf("read back an object out of bounds: %v", o)
			}
		}
	})
}

// A journal that is a second name of another file (a hard link) is never written, even with a
// half line at its end that the next change would cut.
func TestManifestJournalHardLinkNotWritten(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManifest(dir, "kubernetes", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Keep()
	other := dir + "/token"
	os.WriteFile(other, []byte("secret-token-without-newline"), 0o600)
	if err := os.Link(other, journalPath(m.Path())); err != nil {
		t.Skip("no hard links here:", err)
	}
	back, err := ReadManifest(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Record(Object{Kind: "Pod", Name: "x"}); err == nil || !strings.Contains(err.Error(), "second name") {
		t.Fatalf("a change through a hard link: %v", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "secret-token-without-newline" {
		t.Fatalf("the linked file now holds %q", b)
	}
}

// A record is on the disk before Record returns (and so before its object is created): a crash of
// this machine right after the taint or the drain cannot lose the line that lets clean undo it.
func TestManifestRecordIsSyncedBeforeItReturns(t *testing.T) {
	var synced []string
	defer func(f func(*os.File) error) { syncJournal = f }(syncJournal)
	syncJournal = func(f *os.File) error {
		b, err := os.ReadFile(f.Name())
		synced = append(synced, string(b))
		if err != nil {
			return err
		}
		return f.Sync()
	}
	m, err := NewManifest(t.TempDir(), "slurm", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"node1", "node2"} {
		if err := m.Record(Object{Kind: "Drain", Name: name, Host: name}); err != nil {
			t.Fatal(err)
		}
		if len(synced) != i+1 || !strings.Contains(synced[i], `"name":"`+name+`"`) {
			t.Fatalf("after recording %s: the journal was synced %d times, last with %q", name, len(synced), synced)
		}
	}
	syncJournal = func(*os.File) error { return fmt.Errorf("input/output error") }
	if err := m.Record(Object{Kind: "Drain", Name: "node3", Host: "node3"}); err == nil || !strings.Contains(err.Error(), "journal") {
		t.Errorf("a journal that cannot be synced: %v, want an error (the caller then makes nothing)", err)
	}
	m.Finish()
}

// Nodes that record at once share an fsync, and none of them returns before its own line is on the
// disk.
func TestManifestConcurrentRecordsShareSyncs(t *testing.T) {
	var mu sync.Mutex
	var snapshots []string
	defer func(f func(*os.File) error) { syncJournal = f }(syncJournal)
	syncJournal = func(f *os.File) error {
		b, err := os.ReadFile(f.Name())
		time.Sleep(2 * time.Millisecond) // a disk's fsync: the other nodes' lines queue behind it
		mu.Lock()
		snapshots = append(snapshots, string(b))
		mu.Unlock()
		return err
	}
	m, err := NewManifest(t.TempDir(), "kubernetes", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Finish()
	const nodes = 64
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			name := fmt.Sprintf("gpuvet-engine-%d", i)
			if err := m.Record(Object{Kind: "Pod", Namespace: "ns", Name: name, Host: "n"}); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range snapshots {
				if strings.Contains(s, `"name":"`+name+`"`) {
					return
				}
			}
			t.Errorf("%s: Record returned before a sync that holds its line", name)
		})
	}
	wg.Wait()
	if len(snapshots) == 0 || len(snapshots) >= nodes {
		t.Errorf("%d records took %d syncs: want at least one, and fewer than one each", nodes, len(snapshots))
	}
}
