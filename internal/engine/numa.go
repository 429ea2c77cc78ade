package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/sysfs"
	"golang.org/x/sys/unix"
)

// BindProcessToNode pins every thread of this process (and so every thread the Go runtime starts
// from them) to the CPUs of NUMA node, so the in-process load generator runs next to the GPU it
// drives. Memory is not bound (that needs the policy at allocation time). restore puts every
// thread back on the CPUs it had. It is meant for one GPU at a time: with several GPUs loaded at
// once on different nodes there is no one right placement.
func BindProcessToNode(node int) (restore func(), cpus string, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", node))
	if err != nil {
		return nil, "", fmt.Errorf("NUMA node %d: %w", node, err)
	}
	cpus = strings.TrimSpace(string(raw))
	set, err := cpuSet(cpus)
	if err != nil {
		return nil, "", fmt.Errorf("NUMA node %d cpulist %q: %w", node, cpus, err)
	}
	tids, err := threads()
	if err != nil {
		return nil, "", err
	}
	saved := map[int]unix.CPUSet{}
	for _, tid := range tids {
		var old unix.CPUSet
		if unix.SchedGetaffinity(tid, &old) != nil {
			continue // the thread exited meanwhile
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			continue
		}
		saved[tid] = old
	}
	restore = func() {
		// Threads started while bound inherited the node's CPUs: give them the widest saved mask.
		var wide unix.CPUSet
		for _, m := range saved {
			for i := range wide {
				wide[i] |= m[i]
			}
		}
		now, _ := threads()
		for _, tid := range now {
			m, ok := saved[tid]
			if !ok {
				m = wide
			}
			unix.SchedSetaffinity(tid, &m)
		}
	}
	return restore, cpus, nil
}

func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(filepath.Base(e.Name())); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}

// affinityCPUs is how many CPUs unix.CPUSet (the kernel's default cpu_set_t) holds.
const affinityCPUs = 1024

// cpuSet turns a kernel cpulist into the affinity mask sched_setaffinity takes.
func cpuSet(list string) (unix.CPUSet, error) {
	var set unix.CPUSet
	cpus, err := sysfs.ParseCPUList(list)
	if err != nil {
		return set, err
	}
	if len(cpus) == 0 {
		return set, fmt.Errorf("no CPUs")
	}
	for _, c := range cpus {
		if c >= affinityCPUs {
			return set, fmt.Errorf("cpu %d beyond %d, the last an affinity mask holds", c, affinityCPUs-1)
		}
		set.Set(c)
	}
	return set, nil
}
