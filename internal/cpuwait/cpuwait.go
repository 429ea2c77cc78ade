// Package cpuwait reads how long a process and its descendants waited for a CPU (Linux
// /proc/PID/task/TID/schedstat): the time their threads were runnable but not running. An engine
// on a healthy GPU serves slower when its host's CPUs are oversubscribed (a noisy VM neighbour, a
// busy node, a test machine running other work); gpuvet reads the wait over each load rung, so that
// a gap the CPUs made is put on the host, not on the GPU.
package cpuwait

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sample is what a process tree's threads had spent, in total, when it was read, and the host's
// CPU time counters (/proc/stat, in clock ticks) then.
type Sample struct {
	At   time.Time
	Run  time.Duration // on a CPU
	Wait time.Duration // runnable, waiting on a run queue
	// Steal and Total are the host's stolen and total CPU ticks: in a VM, the time the hypervisor
	// ran something else on the vCPUs, which the guest counts as its threads' run time.
	Steal, Total uint64
	// Wall is the wall clock of a host pressure reading (ReadPressure), whose Wait is the time some
	// task of the host waited for a CPU; 0 for a process tree's reading.
	Wall time.Duration
}

// WaitPct is the share of the time the tree wanted a CPU between a and b that it spent waiting for
// one (0-100), counting as waiting the share of its run time a VM's hypervisor stole (the host's
// steal share then); ok is false when it did not want one at all. A single busy thread waiting 20 %
// of the time ran 20 % slower than it would have on a CPU of its own.
func WaitPct(a, b Sample) (pct float64, ok bool) {
	if b.Wall > 0 { // the host's pressure: the share of the window some task waited
		wall, wait := b.Wall-a.Wall, b.Wait-a.Wait
		if a.Wall <= 0 || wall <= 0 || wait < 0 {
			return 0, false
		}
		return min(100, 100*float64(wait)/float64(wall)), true
	}
	run, wait := b.Run-a.Run, b.Wait-a.Wait
	if run < 0 || wait < 0 || run+wait <= 0 {
		return 0, false
	}
	stolen := 0.0
	if b.Total > a.Total && b.Steal >= a.Steal {
		stolen = float64(run) * float64(b.Steal-a.Steal) / float64(b.Total-a.Total)
	}
	return 100 * (float64(wait) + stolen) / float64(run+wait), true
}

// Bounds on a walk: a tree larger than this is not an engine, and reading it would cost more than
// it tells.
const (
	maxProcs   = 256
	maxThreads = 8192
)

// Read sums the schedstat of every thread of pid and its descendants (threads and processes that
// ended since an earlier read take their time with them: a difference over a window is then low,
// never high). The proc root is a parameter so that tests read a fixture tree.
func Read(procRoot string, pid int) (Sample, error) {
	s := Sample{At: time.Now()}
	if pid <= 0 {
		return s, fmt.Errorf("cpuwait: no process (pid %d)", pid)
	}
	if b, err := readSmall(filepath.Join(procRoot, "stat")); err == nil {
		s.Steal, s.Total, _ = ParseStat(b)
	}
	queue, seen, threads := []int{pid}, map[int]bool{pid: true}, 0
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tids, err := os.ReadDir(filepath.Join(procRoot, strconv.Itoa(p), "task"))
		if err != nil {
			if p == pid {
				return s, fmt.Errorf("cpuwait: %w", err)
			}
			continue // a child that ended
		}
		for _, t := range tids {
			if threads++; threads > maxThreads {
				return s, fmt.Errorf("cpuwait: process %d has more than %d threads in its tree", pid, maxThreads)
			}
			dir := filepath.Join(procRoot, strconv.Itoa(p), "task", t.Name())
			if b, err := readSmall(filepath.Join(dir, "schedstat")); err == nil {
				if run, wait, err := ParseSchedstat(b); err == nil {
					s.Run += run
					s.Wait += wait
				}
			}
			b, err := readSmall(filepath.Join(dir, "children"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err != nil || c <= 0 || seen[c] {
					continue
				}
				if len(seen) >= maxProcs {
					return s, fmt.Errorf("cpuwait: process %d has more than %d processes in its tree", pid, maxProcs)
				}
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
	return s, nil
}

// readSmall reads a proc file of at most 64 KiB (a children list of thousands of pids fits),
// growing its buffer from a few hundred bytes as io.ReadAll does: it runs for every thread of the
// tree twice a second, and a schedstat line is 30 bytes.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// ParseSchedstat reads a thread's schedstat line: time on a CPU (ns), time waiting on a run queue
// (ns), timeslices run.
func ParseSchedstat(b []byte) (run, wait time.Duration, err error) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, errors.New("schedstat: want three numbers")
	}
	r, err1 := strconv.ParseUint(string(f[0]), 10, 63)
	w, err2 := strconv.ParseUint(string(f[1]), 10, 63)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("schedstat: not numbers: %q", bytes.TrimSpace(b))
	}
	return time.Duration(r), time.Duration(w), nil
}

// Over is the wait share (WaitPct) over the window [from, to] of a series of samples in time
// order: from the last sample at or before from to the first at or after to (the nearest inside
// where none is outside). ok is false when the samples span less than half the window.
func Over(samples []Sample, from, to time.Time) (pct float64, ok bool) {
	if len(samples) < 2 || !to.After(from) {
		return 0, false
	}
	a, b := -1, -1
	for i, s := range samples {
		if !s.At.After(from) || a < 0 && !s.At.Before(from) {
			a = i
		}
		if b < 0 && !s.At.Before(to) {
			b = i
		}
	}
	if b < 0 {
		b = len(samples) - 1
	}
	if a < 0 || b <= a || samples[b].At.Sub(samples[a].At) < to.Sub(from)/2 {
		return 0, false
	}
	return WaitPct(samples[a], samples[b])
}

// ReadPressure reads the host's CPU pressure, procRoot/pressure/cpu (Linux PSI): the time some task
// waited for a CPU since boot, with the wall clock, so that WaitPct between two readings is the
// share of the window some task of the host waited. In a container it is the whole host's (PSI is
// not namespaced): the contention an engine in a pod beside the load's met, or an upper bound of it.
func ReadPressure(procRoot string) (Sample, error) {
	b, err := readSmall(filepath.Join(procRoot, "pressure", "cpu"))
	now := time.Now()
	if err != nil {
		return Sample{At: now}, fmt.Errorf("cpuwait: %w", err)
	}
	some, err := ParsePressure(b)
	if err != nil {
		return Sample{At: now}, err
	}
	return Sample{At: now, Wait: some, Wall: time.Duration(now.UnixNano())}, nil
}

// ParsePressure reads the "some" line's total (µs) of a PSI file ("some avg10=0.00 avg60=0.00
// avg300=0.00 total=123").
func ParsePressure(b []byte) (time.Duration, error) {
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 0 || string(f[0]) != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := bytes.CutPrefix(kv, []byte("total=")); ok {
				us, err := strconv.ParseUint(string(v), 10, 53)
				if err != nil {
					return 0, fmt.Errorf("pressure: total not a number: %q", v)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
	}
	return 0, errors.New("pressure: no \"some ... total=\" line")
}

// ParseStat reads the host's steal and total CPU ticks from /proc/stat's first line ("cpu  user
// nice system idle iowait irq softirq steal ..."); a kernel without steal gives 0.
func ParseStat(b []byte) (steal, total uint64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, errors.New("stat: no cpu line")
	}
	for i, x := range f[1:min(len(f), 11)] {
		v, err := strconv.ParseUint(string(x), 10, 56) // 8 of them cannot overflow the total
		if err != nil {
			return 0, 0, fmt.Errorf("stat: not a number: %q", x)
		}
		if i < 8 { // guest and guest_nice are inside user and nice already
			total += v
		}
		if i == 7 {
			steal = v
		}
	}
	return steal, total, nil
}
