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

// Clock-event reason bits (nvmlClocksEventReason*): the schema's (results.Clock*), named here for
// the readers of NVML and nvidia-smi.
const (
	ReasonGPUIdle                   = results.ClockGPUIdle
	ReasonApplicationsClocksSetting = results.ClockApplicationsClocksSetting
	ReasonSWPowerCap                = results.ClockSWPowerCap
	ReasonHWSlowdown                = results.ClockHWSlowdown
	ReasonSyncBoost                 = results.ClockSyncBoost
	ReasonSWThermalSlowdown         = results.ClockSWThermalSlowdown
	ReasonHWThermalSlowdown         = results.ClockHWThermalSlowdown
	ReasonHWPowerBrakeSlowdown      = results.ClockHWPowerBrakeSlowdown
	ReasonDisplayClockSetting       = results.ClockDisplayClockSetting
)

// ReasonNames decodes a clock-event mask (results.ClockEventNames).
func ReasonNames(mask uint64) []string { return results.ClockEventNames(mask) }

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
