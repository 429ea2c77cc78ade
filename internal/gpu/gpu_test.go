package gpu

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestReasonNames(t *testing.T) {
	cases := []struct {
		mask uint64
		want []string
	}{
		{0, nil},
		{0x1, []string{"gpu_idle"}},
		{0x4, []string{"sw_power_cap"}},
		{0x1ff, []string{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
			"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"}},
		{0x8 | 0x400, []string{"hw_slowdown", "unknown_0x400"}},
	}
	for _, c := range cases {
		if got := ReasonNames(c.mask); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ReasonNames(%#x) = %v, want %v", c.mask, got, c.want)
		}
	}
}

func TestNUMANode(t *testing.T) {
	dir := t.TempDir()
	old := sysfsRoot
	sysfsRoot = dir
	defer func() { sysfsRoot = old }()
	write := func(id, v string) {
		os.MkdirAll(filepath.Join(dir, id), 0o755)
		os.WriteFile(filepath.Join(dir, id, "numa_node"), []byte(v), 0o644)
	}
	write("0000:1b:00.0", "1\n")
	write("0000:00:06.0", "-1\n")
	write("0000:00:07.0", "garbage")
	cases := []struct {
		bus     string
		want    int
		whyPart string
	}{
		{"00000000:1B:00.0", 1, ""},
		{"00000000:00:06.0", -1, "typical in a VM"},
		{"00000000:00:07.0", -1, "want an integer"},
		{"00000000:00:08.0", -1, "no such file"},
	}
	for _, c := range cases {
		n, why := NUMANode(c.bus)
		if n != c.want || (c.whyPart == "") != (why == "") || !strings.Contains(why, c.whyPart) {
			t.Errorf("NUMANode(%s) = %d, %q; want %d, ~%q", c.bus, n, why, c.want, c.whyPart)
		}
	}
}

func TestParseH200Idle(t *testing.T) {
	src, err := FromNvidiaSMIXML("testdata/h200-idle.xml", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gpus, err := src.GPUs()
	if err != nil || len(gpus) != 1 {
		t.Fatalf("GPUs = %d, %v", len(gpus), err)
	}
	g := gpus[0]
	check := func(field string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", field, got, want)
		}
	}
	check("name", g.Name, "NVIDIA H200")
	check("uuid", g.UUID, "GPU-00000000-1111-2222-3333-444444444444")
	check("serial", g.Serial, "1650000000001")
	check("bus", g.PCIBusID, "00000000:00:06.0")
	check("numa", g.NUMANode, -1)
	check("vbios", g.VBIOS, "96.00.A5.00.1A")
	check("arch", g.Architecture, "Hopper")
	check("cc", g.ComputeCapability, "9.0")
	check("mem", g.MemoryTotalMiB, int64(143771))
	check("used", *g.MemoryUsedMiB, int64(0))
	check("driver", g.DriverVersion, "580.159.04")
	check("cuda", g.CUDAVersion, "13.0")
	check("pcie", [4]int{g.PCIe.GenCurrent, g.PCIe.GenMax, g.PCIe.WidthCurrent, g.PCIe.WidthMax}, [4]int{5, 5, 16, 16})
	check("limit", *g.PowerLimitW, 700.0)
	check("draw", *g.PowerDrawW, 123.82)
	check("maxclk", *g.MaxSMClockMHz, 1980)
	check("temp", *g.TemperatureC, 33)
	check("persist", *g.Persistence, true)
	check("ecc", *g.ECCEnabled, true)
	check("ecc vol", *g.ECC.VolatileUncorrected, int64(0))
	check("ecc agg", *g.ECC.AggregateUncorrected, int64(0))
	check("retired pending (N/A on H200)", g.RetiredPagesPending == nil, true)
	check("remap", *g.RemappedRows, results.RemappedRows{})
	check("reasons", g.ClockEvents.Mask, uint64(0x1))
	check("reason names", g.ClockEvents.Names, []string{"gpu_idle"})
	joined := strings.Join(g.Unsupported, "\n")
	for _, want := range []string{"numa_node", "compute_capability", "retired_pages_pending"} {
		if !strings.Contains(joined, want) {
			t.Errorf("Unsupported lacks %s: %v", want, g.Unsupported)
		}
	}
	if _, err := src.Sample(0); err == nil || !strings.Contains(err.Error(), "capture") {
		t.Errorf("Sample on a capture: err = %v, want one saying it is a capture", err)
	}
}

func TestParseAfterLoadAndTwoGPUs(t *testing.T) {
	b, _ := os.ReadFile("testdata/h200-after-load.xml")
	gpus, err := ParseNvidiaSMIXML(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Right after load: gpu_idle is no longer active and no reason is active at the moment of capture.
	if gpus[0].ClockEvents.Mask != 0 || *gpus[0].TemperatureC != 36 {
		t.Errorf("after load: mask %#x temp %d", gpus[0].ClockEvents.Mask, *gpus[0].TemperatureC)
	}
	b, _ = os.ReadFile("testdata/h200x2.xml")
	gpus, err = ParseNvidiaSMIXML(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].Index != 0 || gpus[1].Index != 1 || gpus[0].PCIBusID == gpus[1].PCIBusID {
		t.Fatalf("two GPUs: %+v", gpus)
	}
	for _, g := range gpus {
		if g.Name != "NVIDIA H200" || g.PCIe.WidthMax != 16 || g.MemoryTotalMiB < 140000 {
			t.Errorf("GPU %d: %s width %d mem %d", g.Index, g.Name, g.PCIe.WidthMax, g.MemoryTotalMiB)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "EOF"},
		{"not xml", "hello", "nvidia_smi_log"},
		{"broken", "<nvidia_smi_log><gpu>", "line 1"},
		{"wrong root", "<foo></foo>", "nvidia_smi_log"},
		{"no gpu", "<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>", "no <gpu>"},
	}
	for _, c := range cases {
		_, err := ParseNvidiaSMIXML([]byte(c.in), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	// A value that is there but unreadable is named with the text found, and the rest still parses.
	g, err := ParseNvidiaSMIXML([]byte(`<nvidia_smi_log><gpu id="0"><product_name>X</product_name>
		<temperature><gpu_temp>hot C</gpu_temp></temperature>
		<clocks_throttle_reasons><clocks_throttle_reason_hw_slowdown>Active</clocks_throttle_reason_hw_slowdown></clocks_throttle_reasons>
		</gpu></nvidia_smi_log>`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g[0].TemperatureC != nil || !strings.Contains(strings.Join(g[0].Unsupported, ";"), `temperature: cannot read "hot C"`) {
		t.Errorf("bad temperature: %v %v", g[0].TemperatureC, g[0].Unsupported)
	}
	if g[0].ClockEvents.Mask != ReasonHWSlowdown {
		t.Errorf("old throttle spelling: mask %#x", g[0].ClockEvents.Mask)
	}
	if _, err := FromNvidiaSMIXML("testdata/none.xml", nil); err == nil || !strings.Contains(err.Error(), "nvidia-smi -q -x") {
		t.Errorf("missing file: %v", err)
	}
}

func TestOpenNVMLWithoutDriver(t *testing.T) {
	src, err := OpenNVML()
	if err == nil {
		src.Close()
		t.Skip("an NVIDIA driver is present here")
	}
	if err.Error() != "no NVIDIA driver found (libnvidia-ml.so.1 not loadable)" {
		t.Errorf("err = %q", err)
	}
}

func FuzzParseNvidiaSMIXML(f *testing.F) {
	for _, p := range []string{"testdata/h200-idle.xml", "testdata/h200x2.xml", "testdata/h200-busy.xml",
		"testdata/h200-recovery-node-reboot.xml", "testdata/h200x2-fabric-in-progress.xml", "testdata/h200x2-fabric-error.xml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<nvidia_smi_log><gpu><pci><pci_gpu_link_info><link_widths><max_link_width>x</max_link_width></link_widths></pci_gpu_link_info></pci></gpu></nvidia_smi_log>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		gpus, err := ParseNvidiaSMIXML(b, nil)
		if err == nil && len(gpus) == 0 {
			t.Fatal("no error and no GPU")
		}
		for i, g := range gpus {
			if g.Index != i || g.NUMANode < -1 {
				t.Fatalf("GPU %d: index %d numa %d", i, g.Index, g.NUMANode)
			}
			// The driver's signals: a recovery action is normalized (or kept verbatim, never
			// padded), and a fabric is there only with a state.
			if ra := g.RecoveryAction; ra != strings.TrimSpace(ra) || NormalizeRecoveryAction(ra) != ra {
				t.Fatalf("GPU %d: recovery action %q not normalized", i, ra)
			}
			if g.Fabric != nil && (g.Fabric.State == "" || g.Fabric.State != strings.TrimSpace(g.Fabric.State)) {
				t.Fatalf("GPU %d: fabric %+v", i, g.Fabric)
			}
		}
		// The processes and load of the same capture (the busy check): one per GPU, whatever the input.
		occ, oerr := ParseNvidiaSMIOccupancy(b)
		if (oerr == nil) != (err == nil) || len(occ) != len(gpus) {
			t.Fatalf("occupancy %d for %d GPUs: %v / %v", len(occ), len(gpus), oerr, err)
		}
		for _, o := range occ {
			for _, p := range o.Processes {
				if p.Own || p.Hidden {
					t.Fatalf("a capture's process marked own or hidden: %+v", p)
				}
			}
		}
	})
}
