package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// TestNVMLGuards runs the NVML source against go-nvml's mock DGX H200 whose "driver" exports only a
// few symbols: every call it lacks must be skipped and listed in Unsupported, never called (a call of a
// missing symbol kills a real process), and NOT_SUPPORTED must be recorded the same way.
func TestNVMLGuards(t *testing.T) {
	srv := dgxh200.New()
	exported := map[string]bool{
		"nvmlDeviceGetName": true, "nvmlDeviceGetUUID": true, "nvmlDeviceGetPciInfo_v3": true,
		"nvmlDeviceGetCudaComputeCapability": true, "nvmlDeviceGetArchitecture": true, "nvmlDeviceGetMemoryInfo": true,
		"nvmlDeviceGetRemappedRows": true, "nvmlDeviceGetCurrentClocksThrottleReasons": true,
	}
	srv.LookupSymbolFunc = func(sym string) error {
		if exported[sym] {
			return nil
		}
		return errors.New("undefined symbol: " + sym)
	}
	for _, d := range srv.Devices {
		m := d.(*server.Device)
		m.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
		m.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return 0x8 | 0x4, nvml.SUCCESS }
	}
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gpus, err := src.GPUs()
	if err != nil || len(gpus) != 8 {
		t.Fatalf("%d GPUs, %v", len(gpus), err)
	}
	g := gpus[3]
	if g.Index != 3 || !strings.Contains(g.Name, "H200") || g.UUID == "" || g.ComputeCapability != "9.0" || g.Architecture != "Hopper" || g.MemoryTotalMiB < 140000 {
		t.Errorf("inventory: %+v", g)
	}
	if g.NUMANode != -1 {
		t.Errorf("numa %d: the mock's bus ids are not in this host's sysfs, want -1", g.NUMANode)
	}
	// The old-driver spelling of the clock reasons is used when the new one is missing.
	if g.ClockEvents.Mask != 0xc || strings.Join(g.ClockEvents.Names, ",") != "sw_power_cap,hw_slowdown" {
		t.Errorf("clock events %+v", g.ClockEvents)
	}
	notes := strings.Join(g.Unsupported, "\n")
	for _, want := range []string{
		"nvmlDeviceGetSerial: not in this driver's NVML",
		"nvmlDeviceGetEnforcedPowerLimit: not in this driver's NVML",
		"nvmlDeviceGetRemappedRows: not supported",
		"numa_node unknown",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("Unsupported lacks %q:\n%s", want, notes)
		}
	}
	if g.RemappedRows != nil || g.PowerLimitW != nil || g.ECCEnabled != nil {
		t.Errorf("values from calls that did not happen: remap %v limit %v ecc %v", g.RemappedRows, g.PowerLimitW, g.ECCEnabled)
	}
	// Sample with only the clock reasons: a partial sample, no error.
	if s, err := src.Sample(0); err != nil || s.ClockReasons != 0xc {
		t.Errorf("Sample: %+v, %v", s, err)
	}
	// With nothing readable: an error naming what is missing, no crash.
	delete(exported, "nvmlDeviceGetCurrentClocksThrottleReasons")
	if _, err := src.Sample(0); err == nil || !strings.Contains(err.Error(), "nvmlDeviceGetPowerUsage") {
		t.Errorf("Sample: %v", err)
	}
	if _, err := src.Sample(8); err == nil {
		t.Error("Sample(8) on 8 GPUs: no error")
	}
}
