package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestParseTopoMatrixH200x2(t *testing.T) {
	b, err := os.ReadFile("testdata/h200x2-topo.txt")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := ParseTopoMatrix(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 || pairs[0].A != 0 || pairs[0].B != 1 || pairs[0].Path != "NV18" || pairs[0].NVLinks != 18 {
		t.Errorf("pairs = %+v, want one NV18 pair 0–1", pairs)
	}
}

func TestParseTopoMatrixPCIeAndNICs(t *testing.T) {
	in := "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\n" +
		"GPU0\t X \tPIX\tSYS\tNODE\t0-15\n" +
		"GPU1\tPIX\t X \tSYS\tNODE\t0-15\n" +
		"GPU2\tSYS\tSYS\t X \tSYS\t16-31\n" +
		"NIC0\tNODE\tNODE\tSYS\t X\n\nLegend:\n  X = Self\n"
	pairs, err := ParseTopoMatrix([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 3 || pairs[0].Path != "PIX" || pairs[1].Path != "SYS" || pairs[2].Path != "SYS" || pairs[0].NVLinks != 0 {
		t.Errorf("pairs = %+v, want PIX, SYS, SYS (the NIC ignored)", pairs)
	}
}

func TestParseTopoMatrixErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":        "",
		"unknown path": "\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X\n",
		"zero links":   "\tGPU0\tGPU1\nGPU0\t X \tNV0\nGPU1\tNV0\t X\n",
		"missing row":  "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\tNV4\nGPU2\tNV4\tNV4\t X\n",
		"short row":    "\tGPU0\tGPU1\nGPU0\t X\nGPU1\tNV2\t X\n",
	} {
		if _, err := ParseTopoMatrix([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "topo matrix") {
			t.Errorf("%s: %v does not say what was being read", name, err)
		}
	}
}

func TestParseNvLinkStatusH200x2(t *testing.T) {
	b, err := os.ReadFile("testdata/h200x2-nvlink.txt")
	if err != nil {
		t.Fatal(err)
	}
	links, err := ParseNvLinkStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 2 {
		t.Fatalf("%d GPUs, want 2", len(links))
	}
	for _, gl := range links {
		if len(gl.Links) != 18 || gl.Up() != 18 {
			t.Errorf("GPU %d: %d links, %d up; want 18 up", gl.GPU, len(gl.Links), gl.Up())
		}
		for _, l := range gl.Links {
			if l.GBps != 26.562 {
				t.Errorf("GPU %d link %d: %v GB/s, want 26.562", gl.GPU, l.Link, l.GBps)
			}
		}
	}
}

func TestParseNvLinkStatusInactiveAndErrors(t *testing.T) {
	in := "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
	links, err := ParseNvLinkStatus([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || len(links[0].Links) != 2 || !links[0].Links[0].Up || links[0].Links[1].Up {
		t.Errorf("links = %+v", links)
	}
	for name, bad := range map[string]string{
		"no gpu":       "",
		"link first":   "\t Link 0: 26.562 GB/s\n",
		"bad speed":    "GPU 0: X\n\t Link 0: fast\n",
		"bad unit":     "GPU 0: X\n\t Link 0: 26.5 Gb/s\n",
		"negative":     "GPU 0: X\n\t Link 0: -1 GB/s\n",
		"huge gpu num": "GPU 99999: X\n",
	} {
		if _, err := ParseNvLinkStatus([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestFromLinkCapturesNamesTheFlag(t *testing.T) {
	if _, err := FromLinkCaptures("testdata/none.txt", ""); err == nil || !strings.Contains(err.Error(), "--nvidia-smi-topo") {
		t.Errorf("err = %v", err)
	}
	if _, err := FromLinkCaptures("", "testdata/h200x2-topo.txt"); err == nil || !strings.Contains(err.Error(), "--nvidia-smi-nvlink") {
		t.Errorf("a topo matrix given as nvlink status: err = %v", err)
	}
	ic, err := FromLinkCaptures("testdata/h200x2-topo.txt", "testdata/h200x2-nvlink.txt")
	if err != nil || len(ic.Pairs) != 1 || len(ic.Links) != 2 || ic.Source != "nvidia-smi" {
		t.Errorf("ic = %+v, %v", ic, err)
	}
}

func FuzzParseTopoMatrix(f *testing.F) {
	b, _ := os.ReadFile("testdata/h200x2-topo.txt")
	f.Add(b)
	f.Add([]byte("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		pairs, err := ParseTopoMatrix(in)
		if err != nil {
			return
		}
		for _, p := range pairs {
			if p.A >= p.B || p.Path == "" || p.NVLinks < 0 {
				t.Fatalf("bad pair %+v", p)
			}
		}
	})
}

func FuzzParseNvLinkStatus(f *testing.F) {
	b, _ := os.ReadFile("testdata/h200x2-nvlink.txt")
	f.Add(b)
	f.Add([]byte("GPU 0: X\n Link 0: <inactive>\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		links, err := ParseNvLinkStatus(in)
		if err != nil {
			return
		}
		for _, gl := range links {
			for _, l := range gl.Links {
				if (!l.Up && l.GBps != 0) || l.GBps < 0 {
					t.Fatalf("bad link %+v", l)
				}
			}
		}
	})
}

// fieldValue fills an NVML field value with an unsigned long long.
func fieldValue(fv *nvml.FieldValue, v uint64) {
	fv.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
	*(*uint64)(unsafe.Pointer(&fv.Value[0])) = v
	fv.NvmlReturn = uint32(nvml.SUCCESS)
}

// h200Links makes go-nvml's mock DGX H200 an NVSwitch host: every GPU has 18 NVLink 4 links to
// switches at 26.562 GB/s, except GPU 3's link 5, which is down; GPU 0 cannot reach GPU 7 by P2P.
func h200Links(t *testing.T, replay *uint64) *server.Server {
	t.Helper()
	srv := dgxh200.New()
	srv.LookupSymbolFunc = func(sym string) error {
		if sym == "nvmlEventSetCreate" {
			return errors.New("undefined symbol: " + sym) // no XID watcher in this test
		}
		return nil
	}
	for i, d := range srv.Devices {
		m, i := d.(*server.Device), i
		m.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for k, c := range fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10) {
				p.BusId[k] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		m.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			switch {
			case l >= 18:
				return 0, nvml.ERROR_INVALID_ARGUMENT
			case i == 3 && l == 5:
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		m.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return 6, nvml.SUCCESS }
		m.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.SUCCESS }
		m.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) { return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS }
		m.GetFieldValuesFunc = func(fvs []nvml.FieldValue) nvml.Return {
			for k := range fvs {
				switch fvs[k].FieldId {
				case nvml.FI_DEV_NVLINK_GET_SPEED:
					fieldValue(&fvs[k], 26562)
				case nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY:
					fieldValue(&fvs[k], *replay)
				case nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY, nvml.FI_DEV_NVLINK_ERROR_DL_CRC:
					fieldValue(&fvs[k], 0)
				default:
					fvs[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return nvml.SUCCESS
		}
		// An HGX board: GPUs 2k and 2k+1 under one PCIe switch, 0–3 and 4–7 on one socket each.
		m.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j := slices.Index(srv.Devices, other)
			switch {
			case j/2 == i/2:
				return nvml.TOPOLOGY_SINGLE, nvml.SUCCESS
			case j/4 == i/4:
				return nvml.TOPOLOGY_NODE, nvml.SUCCESS
			}
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
		m.GetP2PStatusFunc = func(other nvml.Device, _ nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if i == 0 && other == srv.Devices[7] {
				return nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
	}
	return srv
}

func TestNVMLInterconnectNVSwitch(t *testing.T) {
	replay := uint64(2)
	src, err := openNVML(h200Links(t, &replay))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ic, err := src.Interconnect()
	if err != nil {
		t.Fatal(err)
	}
	if len(ic.Links) != 8 || len(ic.Pairs) != 28 {
		t.Fatalf("%d GPUs with links, %d pairs; want 8 and 28", len(ic.Links), len(ic.Pairs))
	}
	l := ic.Links[3].Links
	if len(l) != 18 || l[5].Up || !l[4].Up || l[4].GBps != 26.562 || l[4].Version != 4 || l[4].RemoteType != "switch" {
		t.Errorf("GPU 3 links: %+v", l[3:6])
	}
	if e := ic.Links[0].Links[0].Errors; e == nil || e.Replay != 2 {
		t.Errorf("errors of GPU 0 link 0: %+v", e)
	}
	for _, p := range ic.Pairs {
		want := "NV18"
		if p.A == 3 || p.B == 3 {
			want = "NV17" // GPU 3 reaches the switches over 17 links
		}
		if p.Path != want || !p.NVSwitch {
			t.Errorf("pair %d–%d: %s (switch %v), want %s over NVSwitch", p.A, p.B, p.Path, p.NVSwitch, want)
		}
		wantP2P := "ok"
		if p.A == 0 && p.B == 7 {
			wantP2P = "not supported by the chipset"
		}
		if p.P2P != wantP2P {
			t.Errorf("pair %d–%d: P2P %q, want %q", p.A, p.B, p.P2P, wantP2P)
		}
		// The PCIe common ancestor is read under the NVLinks too: it says which GPUs share a switch.
		wantPCIe := map[bool]string{true: "PIX", false: map[bool]string{true: "NODE", false: "SYS"}[p.A/4 == p.B/4]}[p.A/2 == p.B/2]
		if p.PCIePath != wantPCIe {
			t.Errorf("pair %d–%d: PCIe path %q, want %q", p.A, p.B, p.PCIePath, wantPCIe)
		}
	}
	// A second read sees the counters as they are then: the health phase compares the two.
	replay = 9
	ic2, _ := src.Interconnect()
	if e := ic2.Links[0].Links[0].Errors; e == nil || e.Replay != 9 {
		t.Errorf("second read: %+v", e)
	}
}

func TestNVMLInterconnectPCIeOnly(t *testing.T) {
	srv := dgxh200.New()
	srv.LookupSymbolFunc = func(sym string) error {
		if sym == "nvmlEventSetCreate" {
			return errors.New("undefined")
		}
		return nil
	}
	for _, d := range srv.Devices {
		m := d.(*server.Device)
		m.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		m.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) { return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS }
		m.GetP2PStatusFunc = func(nvml.Device, nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			return nvml.P2P_STATUS_DISABLED_BY_REGKEY, nvml.SUCCESS
		}
	}
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ic, _ := src.Interconnect()
	if !strings.Contains(strings.Join(ic.Notes, ";"), "no NVLink") {
		t.Errorf("notes %q do not say there is no NVLink", ic.Notes)
	}
	if len(ic.Links) != 0 || len(ic.Pairs) != 28 || ic.Pairs[0].Path != "SYS" || ic.Pairs[0].P2P != "disabled by a driver registry key" || !results.PathIsPCIe(ic.Pairs[0].Path) {
		t.Errorf("links %d, pair 0: %+v", len(ic.Links), ic.Pairs[0])
	}
}

// Every NVML value type decodes at its full width: unsigned long is 64 bits on Linux, so a counter
// past 2^32 read as 32 bits would come back small (5e9 as 705,032,704).
func TestFieldValueTypes(t *testing.T) {
	put := func(typ nvml.ValueType, bits uint64) nvml.FieldValue {
		fv := nvml.FieldValue{ValueType: uint32(typ)}
		binary.LittleEndian.PutUint64(fv.Value[:], bits)
		return fv
	}
	neg := int64(-3)
	for _, c := range []struct {
		fv     nvml.FieldValue
		number float64
		uint   uint64
		isUint bool
	}{
		{put(nvml.VALUE_TYPE_UNSIGNED_LONG, 5e9), 5e9, 5e9, true},
		{put(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 5e9), 5e9, 5e9, true},
		{put(nvml.VALUE_TYPE_UNSIGNED_INT, 1<<32|7), 7, 7, true},
		{put(nvml.VALUE_TYPE_UNSIGNED_SHORT, 1<<16|9), 9, 9, true},
		{put(nvml.VALUE_TYPE_SIGNED_LONG_LONG, uint64(neg)), -3, uint64(neg), true},
		{put(nvml.VALUE_TYPE_SIGNED_INT, uint64(uint32(int32(neg)))), -3, uint64(uint32(int32(neg))), true},
		{put(nvml.VALUE_TYPE_DOUBLE, math.Float64bits(53.125)), 53.125, 0, false},
	} {
		if got := fieldNumber(c.fv); got != c.number {
			t.Errorf("type %d: fieldNumber %v, want %v", c.fv.ValueType, got, c.number)
		}
		if got, ok := fieldUint(c.fv); got != c.uint || ok != c.isUint {
			t.Errorf("type %d: fieldUint %d %v, want %d %v", c.fv.ValueType, got, ok, c.uint, c.isUint)
		}
	}
}
