// Package sysfs reads the formats the Linux kernel uses in /sys: CPU lists and PCI addresses.
// It is the one home for them, shared by the health phase, the engine launcher and the CUDA
// microbenchmarks.
package sysfs

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxCPU bounds a CPU number in a cpulist: a larger one is a corrupt file, not a machine.
const MaxCPU = 1 << 16

// ParseCPUList reads the kernel's cpulist format ("0-15,32-47", "3"; "" is no CPU) into CPU numbers
// in the order given.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpulist %q: %q is not a CPU number", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpulist %q: bad range %q", s, part)
			}
		}
		if b >= MaxCPU {
			return nil, fmt.Errorf("cpulist %q: CPU %d is beyond %d", s, b, MaxCPU-1)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// BusID turns NVML's PCI bus id ("00000000:1B:00.0", 8-hex domain) into the kernel's form
// ("0000:1b:00.0", 4-hex domain, lower case): the name of the device under /sys/bus/pci/devices,
// and the form CUDA's cuDeviceGetByPCIBusId accepts everywhere.
func BusID(nvmlID string) string {
	id := strings.ToLower(strings.TrimSpace(nvmlID))
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) == 8 {
		id = dom[4:] + ":" + rest
	}
	return id
}

// ParseCPUMax reads a cgroup v2 cpu.max ("max 100000", "200000 100000") as the cores it allows:
// quota ÷ period; 0 with no error when there is no limit ("max").
func ParseCPUMax(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, fmt.Errorf("cpu.max %q: want \"QUOTA PERIOD\"", s)
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return 0, fmt.Errorf("cpu.max %q: period %q is not a positive integer", s, f[1])
	}
	if f[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return 0, fmt.Errorf("cpu.max %q: quota %q is not max or a positive integer", s, f[0])
	}
	return float64(quota) / float64(period), nil
}

// ParseCFSQuota reads a cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us as the cores they allow;
// 0 with no error when there is no limit (quota -1).
func ParseCFSQuota(quota, period string) (float64, error) {
	q, err := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu.cfs_quota_us %q is not an integer", quota)
	}
	if q < 0 {
		return 0, nil
	}
	p, err := strconv.ParseInt(strings.TrimSpace(period), 10, 64)
	if err != nil || p <= 0 {
		return 0, fmt.Errorf("cpu.cfs_period_us %q is not a positive integer", period)
	}
	if q == 0 {
		return 0, fmt.Errorf("cpu.cfs_quota_us is 0")
	}
	return float64(q) / float64(p), nil
}
