package cpuwait

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// writeTask writes one thread's schedstat (and children list) into a fake proc tree.
func writeTask(t *testing.T, root string, pid, tid int, schedstat, children string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid), "task", strconv.Itoa(tid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "schedstat"), []byte(schedstat), 0o644)
	os.WriteFile(filepath.Join(dir, "children"), []byte(children), 0o644)
}

func TestReadSumsTheTreeAndSkipsWhatEnded(t *testing.T) {
	root := t.TempDir()
	// The engine (10) has two threads; its second thread forked 11 (an engine core, as vLLM's), and
	// 12, which has ended (no directory); 11 forked 10 again (a loop, read once).
	writeTask(t, root, 10, 10, "1000 200 5\n", "")
	writeTask(t, root, 10, 13, "3000 800 9\n", "11 12 x")
	writeTask(t, root, 11, 11, "6000 4000 7\n", "10")
	writeTask(t, root, 20, 20, "999999 999999 1\n", "") // not in the tree
	s, err := Read(root, 10)
	if err != nil {
		t.Fatal(err)
	}
	if s.Run != 10000 || s.Wait != 5000 {
		t.Fatalf("run %d wait %d, want 10000 5000", s.Run, s.Wait)
	}
	if _, err := Read(root, 99); err == nil {
		t.Fatal("a process that is not there read as one")
	}
}

func TestWaitPctAndOver(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64, run, wait time.Duration) Sample {
		return Sample{At: t0.Add(time.Duration(s * float64(time.Second))), Run: run, Wait: wait}
	}
	ss := []Sample{at(0, 0, 0), at(1, 100, 0), at(2, 200, 0), at(3, 300, 100), at(4, 400, 400), at(5, 500, 700)}
	// Rung from 2 s to 4 s: 200 run, 400 wait: 66.7 %.
	if p, ok := Over(ss, t0.Add(2*time.Second), t0.Add(4*time.Second)); !ok || p < 66.6 || p > 66.7 {
		t.Fatalf("2-4 s: %.1f %v", p, ok)
	}
	// Between samples: widened to the samples around it (1-3 s: 200 run, 100 wait).
	if p, ok := Over(ss, t0.Add(1500*time.Millisecond), t0.Add(2500*time.Millisecond)); !ok || p < 33.3 || p > 33.4 {
		t.Fatalf("1.5-2.5 s: %.1f %v", p, ok)
	}
	// A window the samples cover less than half of decides nothing.
	if _, ok := Over(ss, t0.Add(4*time.Second), t0.Add(20*time.Second)); ok {
		t.Fatal("a window past the samples was read")
	}
	// In a VM whose hypervisor stole a quarter of the host's CPU time, a quarter of the tree's run
	// time was the hypervisor's: 200 run, 100 wait, 50 stolen: 50 %.
	a, b := at(0, 0, 0), at(1, 200, 100)
	a.Steal, a.Total, b.Steal, b.Total = 10, 1000, 35, 1100
	if p, ok := WaitPct(a, b); !ok || p < 49.9 || p > 50.1 {
		t.Fatalf("with a quarter stolen: %.1f %v", p, ok)
	}
	if _, ok := WaitPct(at(0, 100, 100), at(1, 100, 100)); ok {
		t.Fatal("a tree that wanted no CPU has a share")
	}
	if _, ok := WaitPct(at(0, 100, 100), at(1, 50, 100)); ok {
		t.Fatal("a tree whose time went back (a thread that ended) has a share")
	}
}

// TestReadThisProcessWhileItSpins reads the live tree of the test itself: a goroutine's work shows
// as time on a CPU.
func TestReadThisProcessWhileItSpins(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("schedstat is Linux's")
	}
	a, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	// Spin until this process has had 50 ms of CPU by its own rusage (on a loaded host, 50 ms of
	// wall time may hold far less CPU time: the test must not measure the host's load).
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	for end := time.Now().Add(10 * time.Second); cpu()-c0 < 50*time.Millisecond && time.Now().Before(end); {
	}
	used := cpu() - c0
	b, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if b.Run-a.Run < used*4/10 {
		t.Fatalf("%v of spinning (rusage) read as %v on a CPU", used, b.Run-a.Run)
	}
}

func TestParseStat(t *testing.T) {
	steal, total, err := ParseStat([]byte("cpu  3915250 691117 2343232 5607612 1000 0 2000 777 0 0\ncpu0 1 2 3 4\n"))
	if err != nil || steal != 777 || total != 3915250+691117+2343232+5607612+1000+2000+777 {
		t.Fatalf("steal %d total %d err %v", steal, total, err)
	}
	if _, _, err := ParseStat([]byte("intr 1 2 3")); err == nil {
		t.Fatal("a file without the cpu line parsed")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("cpu  3915250 691117 2343232 5607612 1000 0 2000 777 0 0\n"))
	f.Add([]byte("cpu 1 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		steal, total, err := ParseStat(b)
		if err == nil && steal > total {
			t.Fatalf("steal %d above total %d from %q", steal, total, b)
		}
	})
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add([]byte("5019333 2882431 25\n"))
	f.Add([]byte("-1 2 3"))
	f.Add([]byte("99999999999999999999 1 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		run, wait, err := ParseSchedstat(b)
		if err == nil && (run < 0 || wait < 0) {
			t.Fatalf("negative times from %q", b)
		}
	})
}

func TestPressureShare(t *testing.T) {
	root := t.TempDir()
	write := func(total string) Sample {
		if err := os.MkdirAll(filepath.Join(root, "pressure"), 0o755); err != nil {
			t.Fatal(err)
		}
		psi := "some avg10=41.20 avg60=30.00 avg300=10.00 total=" + total + "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
		if err := os.WriteFile(filepath.Join(root, "pressure", "cpu"), []byte(psi), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := ReadPressure(root)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := write("1000000")
	b := write("1000000")
	// Two readings a known wall time apart: some task waited 30 % of it.
	b.Wall = a.Wall + 2*time.Second
	b.Wait = a.Wait + 600*time.Millisecond
	if pct, ok := WaitPct(a, b); !ok || math.Abs(pct-30) > 1e-9 {
		t.Fatalf("share %v %v, want 30", pct, ok)
	}
	// A reading whose wait outran the clock (read jitter at full pressure) is 100 %, never more.
	b.Wait = a.Wait + 2100*time.Millisecond
	if pct, ok := WaitPct(a, b); !ok || pct != 100 {
		t.Fatalf("share %v %v, want 100", pct, ok)
	}
	// A counter that went back (another boot's file) reads nothing.
	b.Wait = a.Wait - time.Second
	if _, ok := WaitPct(a, b); ok {
		t.Fatal("a counter that went back gave a share")
	}
	if _, err := ParsePressure([]byte("full avg10=0.00 total=5\n")); err == nil {
		t.Fatal("a file without the some line parsed")
	}
	if _, err := ReadPressure(t.TempDir()); err == nil {
		t.Fatal("a host without PSI read")
	}
}

// TestReadPressureOfThisHost reads the real file where the kernel has PSI.
func TestReadPressureOfThisHost(t *testing.T) {
	a, err := ReadPressure("/proc")
	if err != nil {
		t.Skipf("no CPU pressure on this host: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	b, err := ReadPressure("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if pct, ok := WaitPct(a, b); !ok || pct < 0 || pct > 100 {
		t.Fatalf("share %v %v", pct, ok)
	}
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=0.02 avg60=7.21 avg300=41.32 total=15974231697\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("some total=-1"))
	f.Add([]byte("some total=99999999999999999999999"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParsePressure(b)
		if err == nil && d < 0 {
			t.Fatalf("negative total from %q", b)
		}
	})
}
