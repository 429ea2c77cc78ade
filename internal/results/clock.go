package results

import (
	"fmt"
	"slices"
	"strings"
)

// Clock-event reason bits of ClockEvents.Mask and PowerSample.ClockReasons (nvmlClocksEventReason*;
// the same bits nvidia-smi prints by name). The schema's meaning of the mask: the gpu package reads
// them, the judge's rules decide which are failures.
const (
	ClockGPUIdle                   uint64 = 0x1
	ClockApplicationsClocksSetting uint64 = 0x2
	ClockSWPowerCap                uint64 = 0x4
	ClockHWSlowdown                uint64 = 0x8
	ClockSyncBoost                 uint64 = 0x10
	ClockSWThermalSlowdown         uint64 = 0x20
	ClockHWThermalSlowdown         uint64 = 0x40
	ClockHWPowerBrakeSlowdown      uint64 = 0x80
	ClockDisplayClockSetting       uint64 = 0x100
)

// clockNames names every bit, in bit order.
var clockNames = []struct {
	bit  uint64
	name string
}{
	{ClockGPUIdle, "gpu_idle"},
	{ClockApplicationsClocksSetting, "applications_clocks_setting"},
	{ClockSWPowerCap, "sw_power_cap"},
	{ClockHWSlowdown, "hw_slowdown"},
	{ClockSyncBoost, "sync_boost"},
	{ClockSWThermalSlowdown, "sw_thermal_slowdown"},
	{ClockHWThermalSlowdown, "hw_thermal_slowdown"},
	{ClockHWPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{ClockDisplayClockSetting, "display_clock_setting"},
}

// ClockEventNames decodes a clock-event mask; bits without a name come out as "unknown_0x...".
func ClockEventNames(mask uint64) []string {
	var names []string
	known := uint64(0)
	for _, r := range clockNames {
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

// ClockEventMask encodes reason names into a mask (ClockEventNames' inverse; unknown names add nothing).
func ClockEventMask(names []string) uint64 {
	var m uint64
	for _, r := range clockNames {
		if slices.Contains(names, r.name) {
			m |= r.bit
		}
	}
	return m
}

// PathIsPCIe is true for a GPUPair.Path that is not NVLink (PIX, PXB, PHB, NODE, SYS, BOARD).
func PathIsPCIe(path string) bool { return path != "" && !strings.HasPrefix(path, "NV") }
