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
