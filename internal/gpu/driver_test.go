package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuvet/gpuvet/internal/results"
)

// TestDriverSignalsFromXML reads the recovery action and the fabric registration from the real
// captures and from the copies derived from them by changing that one element (testdata/README.md).
func TestDriverSignalsFromXML(t *testing.T) {
	cases := []struct {
		file     string
		recovery []string
		fabric   []*results.Fabric
	}{
		{"h200-idle.xml", []string{"none"}, []*results.Fabric{nil}}, // a single-GPU VM: fabric N/A
		{"h200-recovery-node-reboot.xml", []string{"node_reboot"}, []*results.Fabric{nil}},
		{"h200x2.xml", []string{"none", "none"}, []*results.Fabric{{State: "Completed", Status: "Success"}, {State: "Completed", Status: "Success"}}},
		{"h200x2-fabric-in-progress.xml", []string{"none", "none"}, []*results.Fabric{{State: "Completed", Status: "Success"}, {State: "In Progress"}}},
		{"h200x2-fabric-error.xml", []string{"none", "none"}, []*results.Fabric{{State: "Completed", Status: "Success"}, {State: "Completed", Status: "Insufficient Resources"}}},
	}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		gpus, err := ParseNvidiaSMIXML(b, nil)
		if err != nil || len(gpus) != len(c.recovery) {
			t.Fatalf("%s: %d GPUs, %v", c.file, len(gpus), err)
		}
		for i, g := range gpus {
			if g.RecoveryAction != c.recovery[i] {
				t.Errorf("%s gpu %d: recovery action %q, want %q", c.file, i, g.RecoveryAction, c.recovery[i])
			}
			if (g.Fabric == nil) != (c.fabric[i] == nil) || g.Fabric != nil && *g.Fabric != *c.fabric[i] {
				t.Errorf("%s gpu %d: fabric %+v, want %+v", c.file, i, g.Fabric, c.fabric[i])
			}
		}
	}
}

func TestNormalizeRecoveryAction(t *testing.T) {
	for in, want := range map[string]string{
		"None": "none", " none ": "none", "GPU Reset": "gpu_reset", "Reset": "gpu_reset", "gpu_reset": "gpu_reset",
		"Node Reboot": "node_reboot", "NODE  REBOOT": "node_reboot", "Drain P2P": "drain_p2p", "drain_p2p": "drain_p2p",
		"Drain And Reset": "drain_and_reset", "Drain and Reset": "drain_and_reset", "N/A": "", "": "",
		"Recover IMEX Domain": "Recover IMEX Domain", // unknown: kept verbatim
	} {
		if got := NormalizeRecoveryAction(in); got != want {
			t.Errorf("NormalizeRecoveryAction(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:18:00.0": "0000:18:00", "0000:18:00.0": "0000:18:00", "PCI:0000:18:00": "0000:18:00",
		"0000:18:00": "0000:18:00", "18:00.0": "0000:18:00", "00000000:1B:00.0": "0000:1b:00", "0001:C1:00.0": "0001:c1:00",
		"": "", "GPU0": "", "zz:00.0": "", "0000:18": "",
	} {
		if got := NormalizeBusID(in); got != want {
			t.Errorf("NormalizeBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParseKernelLog reads both fixtures: /dev/kmsg records and dmesg lines.
func TestParseKernelLog(t *testing.T) {
	type want struct {
		kind, bus string
		xid       int
		uuid      string
	}
	cases := []struct {
		file string
		want []want
	}{
		{"kmsg-driver-errors.txt", []want{
			{results.KernelFallenOffBus, "0000:00:07", 79, "GPU-11111111-2222-3333-4444-555555555555"},
			{results.KernelFallenOffBus, "0000:00:07", 0, "GPU-11111111-2222-3333-4444-555555555555"},
			{results.KernelRequiresReset, "0000:00:07", 0, "GPU-11111111-2222-3333-4444-555555555555"},
			{results.KernelXID, "0000:00:06", 13, ""},
			{results.KernelXID, "0000:00:06", 13, ""},
			{results.KernelRmInitFailed, "0000:18:00", 0, ""},
			{results.KernelRmInitFailed, "", 0, ""},
		}},
		{"dmesg-gsp-timeout.txt", []want{
			{results.KernelGSPTimeout, "", 0, ""},
			{results.KernelGSPTimeout, "0000:00:06", 119, ""},
			{results.KernelGSPTimeout, "", 0, ""},
			{results.KernelGSPTimeout, "0000:00:06", 0, ""},
		}},
	}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		evs := ParseKernelLog(b)
		if len(evs) != len(c.want) {
			t.Fatalf("%s: %d events, want %d: %+v", c.file, len(evs), len(c.want), evs)
		}
		for i, w := range c.want {
			e := evs[i]
			if e.Kind != w.kind || e.BusID != w.bus || e.XID != w.xid || e.UUID != w.uuid || !strings.HasPrefix(e.Line, "NVRM: ") {
				t.Errorf("%s event %d: %+v, want %+v", c.file, i, e, w)
			}
		}
	}
	// The record's sequence number and time: /dev/kmsg's microseconds, dmesg's seconds.
	ev, ok, _ := ParseKernelLine("4,1982,812345701,-;NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
	if !ok || ev.Seq != 1982 || ev.TimeS != 812.345701 {
		t.Errorf("kmsg record: %+v %v", ev, ok)
	}
	ev, ok, _ = ParseKernelLine("[ 1234.567890] NVRM: GPU 0000:18:00.0: GPU requires reset")
	if !ok || ev.Seq != 0 || ev.TimeS != 1234.56789 || ev.Kind != results.KernelRequiresReset || ev.BusID != "0000:18:00" {
		t.Errorf("dmesg line: %+v %v", ev, ok)
	}
	for _, line := range []string{"", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module 580.159.04", "usb 1-1: reset high-speed USB device", " SUBSYSTEM=pci NVRM: GPU requires reset"} {
		if ev, ok, _ := ParseKernelLine(line); ok {
			t.Errorf("%q: an event %+v, want none", line, ev)
		}
	}
}

func TestReadKmsg(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kmsg")
	b, _ := os.ReadFile("testdata/kmsg-driver-errors.txt")
	os.WriteFile(p, b, 0o644)
	got, err := ReadKmsg(p)
	if err != nil || len(ParseKernelLog(got.Text)) != 7 || got.Truncated {
		t.Errorf("ReadKmsg: %d events, truncated %v, %v", len(ParseKernelLog(got.Text)), got.Truncated, err)
	}
	if _, err := ReadKmsg(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("a missing kmsg: %v, want an error naming it", err)
	}
}

// TestNVMLDriverSignals reads the recovery action (a field value) and the fabric info through
// go-nvml's mock DGX H200.
func TestNVMLDriverSignals(t *testing.T) {
	srv := dgxh200.New()
	exported := map[string]bool{"nvmlDeviceGetName": true, "nvmlDeviceGetFieldValues": true, "nvmlDeviceGetGpuFabricInfoV": true}
	srv.LookupSymbolFunc = func(sym string) error {
		if exported[sym] {
			return nil
		}
		return errors.New("undefined symbol: " + sym)
	}
	for i, d := range srv.Devices {
		m := d.(*server.Device)
		action := uint32(nvml.GPU_RECOVERY_ACTION_NONE)
		if i == 3 {
			action = uint32(nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET)
		}
		m.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
			if len(v) != 1 || v[0].FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			v[0].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			v[0].Value = [8]byte{byte(action)}
			return nvml.SUCCESS
		}
	}
	old := fabricInfoV3
	defer func() { fabricInfoV3 = old }()
	fabricInfoV3 = func(d nvml.Device) (nvml.GpuFabricInfo_v3, nvml.Return) {
		if d == srv.Devices[5] {
			return nvml.GpuFabricInfo_v3{State: nvml.GPU_FABRIC_STATE_IN_PROGRESS, HealthSummary: nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY}, nvml.SUCCESS
		}
		return nvml.GpuFabricInfo_v3{State: nvml.GPU_FABRIC_STATE_COMPLETED, HealthSummary: nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY}, nvml.SUCCESS
	}
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gpus, _ := src.GPUs()
	for i, g := range gpus {
		want, fab := "none", results.Fabric{State: "Completed", Status: "Success", Health: "Healthy"}
		if i == 3 {
			want = "drain_and_reset"
		}
		if i == 5 {
			fab = results.Fabric{State: "In Progress", Health: "Unhealthy"}
		}
		if g.RecoveryAction != want || g.Fabric == nil || *g.Fabric != fab {
			t.Errorf("gpu %d: recovery %q fabric %+v; want %q %+v", i, g.RecoveryAction, g.Fabric, want, fab)
		}
	}
	if f := fabricFromNVML(nvml.GPU_FABRIC_STATE_NOT_SUPPORTED, nvml.SUCCESS, 0, nil); f != nil {
		t.Errorf("not supported: %+v, want nil", f)
	}
	if f := fabricFromNVML(nvml.GPU_FABRIC_STATE_COMPLETED, nvml.ERROR_TIMEOUT, 0, func(nvml.Return) string { return "Timeout" }); f == nil || f.Status != "Timeout" {
		t.Errorf("completed with an error: %+v", f)
	}
	if got := recoveryFromNVML(6); got != "NVML recovery action 6" {
		t.Errorf("an action newer than this table: %q", got)
	}
}

func FuzzKernelLog(f *testing.F) {
	for _, p := range []string{"testdata/kmsg-driver-errors.txt", "testdata/dmesg-gsp-timeout.txt"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("NVRM: Xid (PCI:): 99999999999999999999, x\n[ -1.0] NVRM: GPU requires reset\n1,2;NVRM: fallen off the bus 0000:zz:00.0"))
	kinds := map[string]bool{results.KernelFallenOffBus: true, results.KernelRequiresReset: true, results.KernelRmInitFailed: true, results.KernelGSPTimeout: true, results.KernelXID: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range ParseKernelLog(b) {
			if !kinds[e.Kind] || !strings.HasPrefix(e.Line, "NVRM: ") || e.Seq < 0 || e.TimeS < 0 || e.XID < 0 {
				t.Fatalf("event %+v", e)
			}
			if e.BusID != "" && NormalizeBusID(e.BusID) != e.BusID {
				t.Fatalf("bus id %q is not normalized", e.BusID)
			}
			if e.XID != 0 && !strings.HasPrefix(e.Line, "NVRM: Xid (") {
				t.Fatalf("xid %d on %q", e.XID, e.Line)
			}
		}
	})
}
