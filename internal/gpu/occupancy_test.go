package gpu

import (
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuvet/gpuvet/internal/busy"
)

// What busy looks like in `nvidia-smi -q -x` (testdata: a real idle capture, the same right after a
// load, and the idle one edited to show a co-tenant with and without its process).
func TestXMLOccupancy(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"testdata/h200-idle.xml", ""},
		{"testdata/h200-after-load.xml", ""},
		{"testdata/h200-busy.xml", "busy: PID 4242 python3, 8.1 GiB"},
		{"testdata/h200-busy-hidden.xml", "not idle: 693 W, 100 % utilization, 8.1 GiB in use, no process visible"},
	} {
		src, err := FromNvidiaSMIXML(c.file, nil)
		if err != nil {
			t.Fatal(err)
		}
		o, err := src.(Occupier).Occupancy(0)
		if err != nil || !o.ProcessesListed || o.PowerLimitW == nil || *o.PowerLimitW != 700 {
			t.Fatalf("%s: %+v, %v", c.file, o, err)
		}
		if got := busy.Reason(o, busy.Options{}); got != c.want {
			t.Errorf("%s: %q, want %q", c.file, got, c.want)
		}
		if _, err := src.(Occupier).Occupancy(1); err == nil {
			t.Errorf("%s: GPU 1 of a one-GPU capture: no error", c.file)
		}
	}
	occ, err := ParseNvidiaSMIOccupancy([]byte(`<nvidia_smi_log><attached_gpus>1</attached_gpus><gpu><product_name>NVIDIA H200</product_name>
<processes><process_info><pid>x1</pid></process_info><process_info><pid>9</pid><type>G</type><used_memory>N/A</used_memory></process_info></processes></gpu></nvidia_smi_log>`))
	if err != nil || len(occ) != 1 || len(occ[0].Processes) != 1 || occ[0].Processes[0].Type != "graphics" || occ[0].Processes[0].UsedMiB != nil ||
		!strings.Contains(strings.Join(occ[0].Notes, ";"), `process pid: cannot read "x1"`) {
		t.Errorf("%+v, %v", occ, err)
	}
}

// NVML's process lists: gpuvet's own process is Own, another visible one is foreign by name, a PID
// this namespace lacks is Hidden; a driver without the calls says so instead of calling them.
func TestNVMLOccupancy(t *testing.T) {
	srv := dgxh200.New()
	srv.LookupSymbolFunc = func(sym string) error {
		if strings.Contains(sym, "Event") {
			return os.ErrNotExist // no XID watcher on the mock
		}
		return nil
	}
	srv.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) { return "/opt/other/python3", nvml.SUCCESS }
	m := srv.Devices[0].(*server.Device)
	m.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 600 << 20}, {Pid: 1, UsedGpuMemory: 8294 << 20}, {Pid: 1 << 30, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
	}
	m.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 8294 << 20}}, nvml.SUCCESS
	}
	m.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 100}, nvml.SUCCESS }
	m.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 693000, nvml.SUCCESS }
	m.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700000, nvml.SUCCESS }
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	o, err := src.Occupancy(0)
	if err != nil || !o.ProcessesListed || len(o.Processes) != 3 || *o.UtilPct != 100 || *o.PowerW != 693 {
		t.Fatalf("%+v, %v", o, err)
	}
	self, init, gone := o.Processes[0], o.Processes[1], o.Processes[2]
	if !self.Own || self.Hidden || init.Own || init.Hidden || init.Type != "compute+graphics" || *init.UsedMiB != 8294 || !gone.Hidden || gone.UsedMiB != nil || gone.Name != "python3" {
		t.Errorf("processes %+v", o.Processes)
	}
	if r := busy.Reason(o, busy.Options{}); !strings.HasPrefix(r, "busy: PID 1 ") || !strings.Contains(r, "8.1 GiB; PID 1073741824 python3 (not in this PID namespace") {
		t.Errorf("reason %q", r)
	}
	srv.LookupSymbolFunc = func(sym string) error {
		if strings.Contains(sym, "RunningProcesses") || strings.Contains(sym, "Event") {
			return os.ErrNotExist
		}
		return nil
	}
	o, _ = src.Occupancy(0)
	if o.ProcessesListed || len(o.Processes) != 0 || !strings.Contains(strings.Join(o.Notes, ";"), "nvmlDeviceGetComputeRunningProcesses: not in this driver's NVML") {
		t.Errorf("without the process calls: %+v", o)
	}
	if r := busy.Reason(o, busy.Options{}); r != "not idle: 693 W, 100 % utilization, no process list from this source" {
		t.Errorf("reason %q", r)
	}
}
