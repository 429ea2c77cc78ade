package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sysfs"
)

// Linker is a Source that can read how its GPUs reach each other (NVML, the simulator, captured
// `nvidia-smi topo -m` / `nvidia-smi nvlink -s`). The health phase reads it at inventory and again at
// the end, so NVLink error counters that grew in between are caught.
type Linker interface {
	Interconnect() (*results.Interconnect, error)
}

// PCIe path names of `nvidia-smi topo -m`, by NVML's common-ancestor level.
var ancestorPath = map[nvml.GpuTopologyLevel]string{
	nvml.TOPOLOGY_INTERNAL: "BOARD", nvml.TOPOLOGY_SINGLE: "PIX", nvml.TOPOLOGY_MULTIPLE: "PXB",
	nvml.TOPOLOGY_HOSTBRIDGE: "PHB", nvml.TOPOLOGY_NODE: "NODE", nvml.TOPOLOGY_SYSTEM: "SYS",
}

// p2pWhy says why NVML reports peer access unavailable.
var p2pWhy = map[nvml.GpuP2PStatus]string{
	nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED: "not supported by the chipset", nvml.P2P_STATUS_GPU_NOT_SUPPORTED: "not supported by the GPU",
	nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED: "not supported by the IOH topology", nvml.P2P_STATUS_DISABLED_BY_REGKEY: "disabled by a driver registry key",
	nvml.P2P_STATUS_NOT_SUPPORTED: "not supported", nvml.P2P_STATUS_UNKNOWN: "unknown",
}

// nvlinkGeneration turns nvmlNvlinkVersion_t (NVML_NVLINK_VERSION_1_0 = 1, 2_0, 2_2, 3_0, 3_1, 4_0,
// 5_0 = 7) into the NVLink generation: a Hopper link reads 6, generation 4.
var nvlinkGeneration = map[uint32]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}

// linkGBpsByVersion is the per-link, one-direction rate nvidia-smi prints when NVML gives no speed
// field: NVLink 2 (Volta) 25, 3 (Ampere) 25, 4 (Hopper) 26.562, 5 (Blackwell) 53.125 GB/s.
var linkGBpsByVersion = map[int]float64{2: 25, 3: 25, 4: 26.5625, 5: 53.125}

// Interconnect reads every GPU's NVLinks and every pair's path and peer-access status through NVML.
// Calls the driver lacks are noted, never made.
func (s *nvmlSource) Interconnect() (*results.Interconnect, error) {
	ic := &results.Interconnect{Source: "nvml"}
	bus := map[string]int{} // PCI bus id (sysfs form) -> GPU index
	for i, d := range s.devices {
		if p, r := d.GetPciInfo(); r == nvml.SUCCESS {
			bus[sysfs.BusID(cString(p.BusId[:]))] = i
		}
	}
	if !s.has("nvmlDeviceGetNvLinkState") {
		ic.Notes = append(ic.Notes, "nvmlDeviceGetNvLinkState: not in this driver's NVML: NVLinks not read")
	} else {
		for i, d := range s.devices {
			if links := s.nvlinks(d, &ic.Notes); len(links) > 0 {
				ic.Links = append(ic.Links, results.GPULinks{GPU: i, Links: links})
			}
		}
		if len(ic.Links) == 0 {
			ic.Notes = append(ic.Notes, "NVML reports no NVLink on these GPUs (a PCIe card, or links not exposed to this VM)")
		}
	}
	for i := range s.devices {
		for j := i + 1; j < len(s.devices); j++ {
			ic.Pairs = append(ic.Pairs, s.pair(i, j, ic.Links, bus, &ic.Notes))
		}
	}
	ic.Notes = dedupe(ic.Notes)
	return ic, nil
}

// nvlinks reads the links of one GPU; a GPU without NVLink returns none.
func (s *nvmlSource) nvlinks(d nvml.Device, notes *[]string) []results.NVLink {
	var out []results.NVLink
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, r := d.GetNvLinkState(l)
		if r == nvml.ERROR_NOT_SUPPORTED || r == nvml.ERROR_INVALID_ARGUMENT {
			break // past the GPU's last link (or no NVLink at all)
		}
		if r != nvml.SUCCESS {
			*notes = append(*notes, fmt.Sprintf("nvmlDeviceGetNvLinkState(link %d): %s", l, s.lib.ErrorString(r)))
			continue
		}
		link := results.NVLink{Link: l, Up: st == nvml.FEATURE_ENABLED}
		if s.has("nvmlDeviceGetNvLinkVersion") {
			if v, r := d.GetNvLinkVersion(l); r == nvml.SUCCESS {
				link.Version = nvlinkGeneration[v]
			}
		}
		if link.Up {
			s.linkPeer(d, l, &link)
			link.GBps = s.linkSpeed(d, l, link.Version)
		}
		link.Errors = s.linkErrors(d, l, notes)
		out = append(out, link)
	}
	return out
}

func (s *nvmlSource) linkPeer(d nvml.Device, l int, link *results.NVLink) {
	if s.has("nvmlDeviceGetNvLinkRemotePciInfo_v2") {
		if p, r := d.GetNvLinkRemotePciInfo(l); r == nvml.SUCCESS {
			link.Remote = sysfs.BusID(cString(p.BusId[:]))
		}
	}
	if s.has("nvmlDeviceGetNvLinkRemoteDeviceType") {
		if t, r := d.GetNvLinkRemoteDeviceType(l); r == nvml.SUCCESS {
			link.RemoteType = map[nvml.IntNvLinkDeviceType]string{nvml.NVLINK_DEVICE_TYPE_GPU: "gpu", nvml.NVLINK_DEVICE_TYPE_SWITCH: "switch",
				nvml.NVLINK_DEVICE_TYPE_IBMNPU: "npu"}[t]
		}
	}
}

// linkSpeed reads the link's speed field (MB/s, as nvidia-smi nvlink -s prints it ÷ 1000); failing
// that, the common speed of the GPU's links; failing that, the figure of the link's version.
func (s *nvmlSource) linkSpeed(d nvml.Device, l, version int) float64 {
	if s.has("nvmlDeviceGetFieldValues") {
		for _, fv := range []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_GET_SPEED, ScopeId: uint32(l)}, {FieldId: nvml.FI_DEV_NVLINK_SPEED_MBPS_COMMON}} {
			vals := []nvml.FieldValue{fv}
			if d.GetFieldValues(vals) == nvml.SUCCESS && nvml.Return(vals[0].NvmlReturn) == nvml.SUCCESS {
				if mbps := fieldNumber(vals[0]); mbps > 0 {
					return mbps / 1000
				}
			}
		}
	}
	return linkGBpsByVersion[version]
}

// fieldNumber decodes an NVML field value (nvmlValue_t, a C union) by its type.
func fieldNumber(fv nvml.FieldValue) float64 {
	v := fv.Value[:]
	switch nvml.ValueType(fv.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(v))
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(v)))
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(v)))
	}
	u, _ := fieldUint(fv)
	return float64(u)
}

// linkErrors reads a link's replay, recovery and CRC counters through NVML's per-link fields, as
// `nvidia-smi nvlink -e` does. Where the driver lacks the fields, nvmlDeviceGetNvLinkErrorCounter's
// replay, recovery and data CRC stand in (on a healthy H200 its data CRC and ECC counters grow by
// dozens a minute under load while the fields and nvidia-smi stay 0: fields first).
func (s *nvmlSource) linkErrors(d nvml.Device, l int, notes *[]string) *results.LinkErrors {
	if s.has("nvmlDeviceGetFieldValues") {
		fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY, ScopeId: uint32(l)},
			{FieldId: nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY, ScopeId: uint32(l)}, {FieldId: nvml.FI_DEV_NVLINK_ERROR_DL_CRC, ScopeId: uint32(l)}}
		if d.GetFieldValues(fv) == nvml.SUCCESS && allOK(fv) {
			replay, _ := fieldUint(fv[0])
			recovery, _ := fieldUint(fv[1])
			crc, _ := fieldUint(fv[2])
			return &results.LinkErrors{Replay: replay, Recovery: recovery, CRC: crc}
		}
	}
	if !s.has("nvmlDeviceGetNvLinkErrorCounter") {
		*notes = append(*notes, "NVLink error counters: neither the per-link fields nor nvmlDeviceGetNvLinkErrorCounter in this driver's NVML")
		return nil
	}
	var e results.LinkErrors
	for _, c := range []struct {
		ctr nvml.NvLinkErrorCounter
		dst *uint64
	}{{nvml.NVLINK_ERROR_DL_REPLAY, &e.Replay}, {nvml.NVLINK_ERROR_DL_RECOVERY, &e.Recovery}, {nvml.NVLINK_ERROR_DL_CRC_DATA, &e.CRC}} {
		v, r := d.GetNvLinkErrorCounter(l, c.ctr)
		if r != nvml.SUCCESS {
			*notes = append(*notes, "nvmlDeviceGetNvLinkErrorCounter: "+s.lib.ErrorString(r)+": NVLink errors not read")
			return nil
		}
		*c.dst = v
	}
	*notes = append(*notes, "NVLink error counters from nvmlDeviceGetNvLinkErrorCounter (this driver lacks the per-link error fields)")
	return &e
}

func allOK(fv []nvml.FieldValue) bool {
	return !slices.ContainsFunc(fv, func(f nvml.FieldValue) bool { return nvml.Return(f.NvmlReturn) != nvml.SUCCESS })
}

// pair finds how GPUs i and j connect: NVLinks joining them directly or through NVSwitches, else
// their PCIe common ancestor; and whether peer access works both ways.
func (s *nvmlSource) pair(i, j int, links []results.GPULinks, bus map[string]int, notes *[]string) results.GPUPair {
	p := results.GPUPair{A: i, B: j}
	direct, viaSwitch := PairLinks(links, i, j, bus)
	switch {
	case direct > 0:
		p.Path, p.NVLinks = fmt.Sprintf("NV%d", direct), direct
	case viaSwitch > 0:
		p.Path, p.NVLinks, p.NVSwitch = fmt.Sprintf("NV%d", viaSwitch), viaSwitch, true
	}
	// The PCIe common ancestor, NVLink or not: which GPUs share a switch's link to the host.
	if s.has("nvmlDeviceGetTopologyCommonAncestor") {
		if lvl, r := s.devices[i].GetTopologyCommonAncestor(s.devices[j]); r == nvml.SUCCESS {
			p.PCIePath = ancestorPath[lvl]
			p.Path = cmp.Or(p.Path, p.PCIePath)
		} else {
			*notes = append(*notes, "nvmlDeviceGetTopologyCommonAncestor: "+s.lib.ErrorString(r))
		}
	}
	if s.has("nvmlDeviceGetP2PStatus") {
		p.P2P = "ok"
		for _, idx := range []nvml.GpuP2PCapsIndex{nvml.P2P_CAPS_INDEX_READ, nvml.P2P_CAPS_INDEX_WRITE} {
			st, r := s.devices[i].GetP2PStatus(s.devices[j], idx)
			if r != nvml.SUCCESS {
				p.P2P = "unknown: nvmlDeviceGetP2PStatus: " + s.lib.ErrorString(r)
				break
			}
			if st != nvml.P2P_STATUS_OK {
				p.P2P = p2pWhy[st]
				break
			}
		}
	}
	return p
}

// PairLinks counts the up NVLinks joining GPUs i and j: direct (remote is the other GPU's bus id) and
// through NVSwitches (the fewer of the two GPUs' up switch links). bus maps a PCI bus id to a GPU.
func PairLinks(links []results.GPULinks, i, j int, bus map[string]int) (direct, viaSwitch int) {
	switchLinks := map[int]int{}
	for _, gl := range links {
		for _, l := range gl.Links {
			if !l.Up {
				continue
			}
			if l.RemoteType == "switch" {
				switchLinks[gl.GPU]++
				continue
			}
			other, ok := bus[sysfs.BusID(l.Remote)]
			if ok && gl.GPU == i && other == j {
				direct++
			}
		}
	}
	return direct, min(switchLinks[i], switchLinks[j])
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
