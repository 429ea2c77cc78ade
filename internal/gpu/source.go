// Package gpu discovers GPUs and reads their live telemetry: through NVML on a host with the NVIDIA
// driver, or from a captured `nvidia-smi -q -x` for support cases and hosts where NVML cannot load.
// Both give the same results.GPUInfo structure.
package gpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sysfs"
)

// Source is where GPU inventory and live telemetry come from.
type Source interface {
	GPUs() ([]results.GPUInfo, error)
	Sample(i int) (results.PowerSample, error) // power W, SM clock, temperature, clock-event reasons, util
	Close() error
}

// Clock-event reason bits (nvmlClocksEventReason*; the same bits nvidia-smi prints by name).
const (
	ReasonGPUIdle                   uint64 = 0x1
	ReasonApplicationsClocksSetting uint64 = 0x2
	ReasonSWPowerCap                uint64 = 0x4
	ReasonHWSlowdown                uint64 = 0x8
	ReasonSyncBoost                 uint64 = 0x10
	ReasonSWThermalSlowdown         uint64 = 0x20
	ReasonHWThermalSlowdown         uint64 = 0x40
	ReasonHWPowerBrakeSlowdown      uint64 = 0x80
	ReasonDisplayClockSetting       uint64 = 0x100
)

// FailureMask is DCGM's clock-event failure mask: HW slowdown, SW thermal, HW thermal, HW power brake.
// SW power cap (0x4) is not in it: a healthy GPU at full load sits at its power limit.
const FailureMask = ReasonHWSlowdown | ReasonSWThermalSlowdown | ReasonHWThermalSlowdown | ReasonHWPowerBrakeSlowdown

// reasonNames names every bit, in bit order.
var reasonNames = []struct {
	bit  uint64
	name string
}{
	{ReasonGPUIdle, "gpu_idle"},
	{ReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{ReasonSWPowerCap, "sw_power_cap"},
	{ReasonHWSlowdown, "hw_slowdown"},
	{ReasonSyncBoost, "sync_boost"},
	{ReasonSWThermalSlowdown, "sw_thermal_slowdown"},
	{ReasonHWThermalSlowdown, "hw_thermal_slowdown"},
	{ReasonHWPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{ReasonDisplayClockSetting, "display_clock_setting"},
}

// ReasonNames decodes a clock-event mask; bits without a name come out as "unknown_0x...".
func ReasonNames(mask uint64) []string {
	var names []string
	known := uint64(0)
	for _, r := range reasonNames {
		known |= r.bit
		if mask&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if mask&bit != 0 && known&bit == 0 {
			names = append(names, fmt.Sprintf("unknown_%#x", bit))
		}
	}
	return names
}

// ClockEvents builds the results form of a mask.
func ClockEvents(mask uint64) results.ClockEvents {
	return results.ClockEvents{Mask: mask, Names: ReasonNames(mask)}
}

// sysfsRoot is where PCI devices live; tests point it elsewhere.
var sysfsRoot = "/sys/bus/pci/devices"

// NUMANode reads the GPU's NUMA node from sysfs. It returns -1 and why when the node is unknown
// (sysfs says -1, as in most VMs, or the file is missing).
func NUMANode(busID string) (int, string) {
	path := sysfsRoot + "/" + sysfs.BusID(busID) + "/numa_node"
	b, err := os.ReadFile(path)
	if err != nil {
		return -1, fmt.Sprintf("numa_node unknown: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1, fmt.Sprintf("numa_node unknown: %s holds %q, want an integer", path, strings.TrimSpace(string(b)))
	}
	if n < 0 {
		return -1, fmt.Sprintf("numa_node unknown: %s says %d (typical in a VM)", path, n)
	}
	return n, ""
}
