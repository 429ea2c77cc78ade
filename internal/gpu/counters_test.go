package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Issue 33: a sample carries the memory clock, memory utilisation and memory in use; Counts reads
// the volatile ECC totals and the PCIe replay counter, and says what it could not read.
func TestNVMLLoadTelemetryAndCounts(t *testing.T) {
	srv := dgxh200.New()
	srv.LookupSymbolFunc = func(sym string) error {
		if strings.HasPrefix(sym, "nvmlEvent") { // the mock has no event sets: no XID watcher
			return errors.New("undefined symbol: " + sym)
		}
		return nil
	}
	for _, d := range srv.Devices {
		m := d.(*server.Device)
		m.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 612000, nvml.SUCCESS }
		m.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
			if c == nvml.CLOCK_MEM {
				return 3201, nvml.SUCCESS
			}
			return 1755, nvml.SUCCESS
		}
		m.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 61, nvml.SUCCESS }
		m.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0x4, nvml.SUCCESS }
		m.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 97, Memory: 41}, nvml.SUCCESS }
		m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 141 << 30, Used: 120 << 30}, nvml.SUCCESS }
		m.GetTotalEccErrorsFunc = func(typ nvml.MemoryErrorType, ct nvml.EccCounterType) (uint64, nvml.Return) {
			if ct != nvml.VOLATILE_ECC {
				t.Errorf("counter type %v, want volatile", ct)
			}
			if typ == nvml.MEMORY_ERROR_TYPE_CORRECTED {
				return 7, nvml.SUCCESS
			}
			return 1, nvml.SUCCESS
		}
		m.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	}
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s, err := src.Sample(2)
	if err != nil || s.PowerW != 612 || s.SMClockMHz != 1755 || s.MemClockMHz != 3201 || s.MemUtilPct != 41 || s.UtilPct != 97 || s.MemUsedMiB != 120<<10 || s.ClockReasons != 0x4 {
		t.Errorf("sample %+v, %v", s, err)
	}
	c, err := src.Counts(2)
	if err != nil || c.ECCCorrected == nil || *c.ECCCorrected != 7 || *c.ECCUncorrected != 1 || c.PCIeReplays != nil || c.Note != "nvmlDeviceGetPcieReplayCounter: not supported" {
		t.Errorf("counts %+v, %v", c, err)
	}
	if _, err := src.Counts(8); err == nil {
		t.Error("Counts(8) on 8 GPUs: no error")
	}
}
