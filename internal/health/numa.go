package health

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/gpuvet/gpuvet/internal/sysfs"
	"golang.org/x/sys/unix"
)

// nodeRoot is where Linux lists NUMA nodes; tests point it elsewhere.
var nodeRoot = "/sys/devices/system/node"

// bindThread locks the calling goroutine to its OS thread and binds that thread's CPUs and memory to a
// NUMA node, so the CPU side of a benchmark (and the pinned host buffers it allocates) sits next to the
// GPU. Threads the CUDA driver starts from this one inherit the binding. The returned text records the
// binding or why there is none.
func bindThread(node int) string {
	runtime.LockOSThread()
	// Never unlock after binding: a goroutine that exits while locked takes its thread with it, so the
	// bound thread never runs other goroutines.
	if node < 0 {
		runtime.UnlockOSThread()
		return "none: NUMA node unknown (sysfs numa_node is -1, as in most VMs)"
	}
	cpus, err := nodeCPUs(node)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Sprintf("none: %v", err)
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Sprintf("none: sched_setaffinity to node %d: %v", node, err)
	}
	mem := fmt.Sprintf("memory bound to node %d", node)
	if err := setMemBind(node); err != nil {
		mem = fmt.Sprintf("memory not bound (set_mempolicy: %v)", err)
	}
	return fmt.Sprintf("cpus of NUMA node %d (%s), %s", node, compactCPUs(cpus), mem)
}

// setMemBind applies MPOL_BIND to node for the calling thread.
func setMemBind(node int) error {
	const mpolBind = 2
	if node >= 64 {
		return fmt.Errorf("node %d beyond a one-word node mask", node)
	}
	mask := uint64(1) << uint(node)
	_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolBind, uintptr(unsafe.Pointer(&mask)), 65)
	if errno != 0 {
		return errno
	}
	return nil
}

func nodeCPUs(node int) ([]int, error) {
	path := fmt.Sprintf("%s/node%d/cpulist", nodeRoot, node)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CPUs of NUMA node %d: %w", node, err)
	}
	cpus, err := sysfs.ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("NUMA node %d has no CPUs (%s is empty)", node, path)
	}
	return cpus, nil
}

// compactCPUs writes CPUs back in cpulist form.
func compactCPUs(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
