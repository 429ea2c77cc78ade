package judge

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// linkFloor is the floor of a peer copy or all-reduce: MinLinkRatio (--min-link-ratio) when set, else
// the datasheet floor of the host's GPU model.
func (r *HealthRules) linkFloor(gpuName, name string) float64 {
	if r.MinLinkRatio > 0 {
		return r.MinLinkRatio
	}
	return r.Floor(gpuName, name)
}

func firstName(h *results.Health) string {
	if len(h.GPUs) == 0 {
		return ""
	}
	return h.GPUs[0].GPU.Name
}

// judgeInterconnect turns the interconnect into flags: links down and error counters that grew on
// their GPU (failures), pairs on PCIe, without peer access, or slow against their link, and a slow
// all-reduce on the host. The pairs' peaks and ratios are the health phase's (health.LinkPeaks).
func judgeInterconnect(h *results.Health, r HealthRules) {
	ic := h.Interconnect
	if ic == nil {
		return
	}
	for _, gl := range ic.Links {
		if gh := gpuAt(h, gl.GPU); gh != nil {
			judgeLinks(gh, gl)
		}
	}
	hostFlag := func(check, subject, format string, args ...any) {
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: subject, Check: check, Reason: fmt.Sprintf(format, args...)})
	}
	for _, p := range ic.Pairs {
		judgePair(h, r, p, hostFlag)
	}
	comparePairs(h, r, hostFlag)
	if ar := ic.AllReduce; ar != nil && ar.Status == results.StatusOK && len(ar.Sizes) > 0 {
		big := ar.Sizes[len(ar.Sizes)-1]
		if fl := r.linkFloor(firstName(h), results.FloorAllReduce); big.BusBWRatio != nil && *big.BusBWRatio < fl {
			hostFlag(CheckAllReduce, "host", "all-reduce bus bandwidth %.0f GB/s at %s, %.0f %% of the links' %.0f GB/s per GPU (floor %.0f %%): a slow link or a PCIe fallback on one GPU holds every rank back",
				big.BusBWGBps, results.SizeText(big.Bytes), *big.BusBWRatio*100, ar.PeakGBps, fl*100)
		}
	}
}

// judgePair flags one GPU pair: on PCIe where the GPU model ships NVLinks (the health phase read
// the catalog), without peer access, or copying slower than the link's floor in either direction.
func judgePair(h *results.Health, r HealthRules, p results.GPUPair, hostFlag func(check, subject, format string, args ...any)) {
	ic, subj := h.Interconnect, pairName(p)
	if results.PathIsPCIe(p.Path) && ic.DatasheetNVLinks > 0 {
		hostFlag(CheckNVLinkPath, subj, "the GPUs reach each other over PCIe (%s) though the %s ships with %d NVLinks: TP across them runs at PCIe speed; check `nvidia-smi topo -m`, the NVLink bridges/baseboard and the fabric manager", p.Path, ic.DatasheetModel, ic.DatasheetNVLinks)
	}
	switch {
	case p.P2P != "" && p.P2P != "ok":
		hostFlag(CheckP2PAccess, subj, "peer access unavailable (NVML: %s): NCCL and TP engines fall back to copies through host memory; check IOMMU/ACS settings and, in a VM, the hypervisor's P2P support", p.P2P)
	case p.Error != "" && strings.Contains(p.Error, "peer access unavailable"):
		hostFlag(CheckP2PAccess, subj, "%s", p.Error)
	}
	for _, f := range []struct {
		name string
		fig  *results.PairFigure
		peak float64
	}{{"unidirectional", p.Uni, p.PeakGBps}, {"bidirectional", p.Bi, 2 * p.PeakGBps}} {
		if fl := r.linkFloor(firstName(h), results.FloorPeerCopy); f.fig != nil && f.fig.Ratio != nil && *f.fig.Ratio < fl {
			hostFlag(CheckP2PBandwidth, subj, "peer copy %s %.0f GB/s, %.0f %% of the link's %.0f GB/s (floor %.0f %%): check the links' state, speed and error counters (`nvidia-smi nvlink -s -e`)",
				f.name, f.fig.GBps, *f.fig.Ratio*100, f.peak, fl*100)
		}
	}
}

// judgeLinks flags a GPU's links that are down and error counters that grew.
func judgeLinks(gh *results.GPUHealth, gl results.GPULinks) {
	flag := func(check, format string, args ...any) { flagGPU(gh, check, fmt.Sprintf(format, args...)) }
	var down []string
	for _, l := range gl.Links {
		if !l.Up {
			down = append(down, fmt.Sprint(l.Link))
		}
		if l.Errors != nil && l.ErrorsAfter != nil {
			if d := growth(*l.Errors, *l.ErrorsAfter); d != "" {
				flag(CheckNVLinkErrors, "NVLink %d error counters grew during the health phase (%s): a marginal link; reseat or service the baseboard, and check `nvidia-smi nvlink -e -i %d`", l.Link, d, gh.GPU.Index)
			}
		}
		if l.Errors != nil && (l.Errors.CRC > 0 || l.Errors.Replay > 0 || l.Errors.Recovery > 0) {
			gh.Notes = appendNew(gh.Notes, fmt.Sprintf("NVLink %d has error counts since the driver loaded (CRC %d, replay %d, recovery %d)", l.Link, l.Errors.CRC, l.Errors.Replay, l.Errors.Recovery))
		}
	}
	if len(down) > 0 {
		flag(CheckNVLinkDown, "NVLink %s down (%d of %d up): the GPU's peer bandwidth drops by that share; check `nvidia-smi nvlink -s -i %d`, the fabric manager, then reseat or RMA",
			strings.Join(down, ", "), len(gl.Links)-len(down), len(gl.Links), gh.GPU.Index)
	}
}

// growth names the counters that grew from a to b, e.g. "replay +12"; "" when none did.
func growth(a, b results.LinkErrors) string {
	var out []string
	for _, c := range []struct {
		name string
		a, b uint64
	}{{"CRC", a.CRC, b.CRC}, {"replay", a.Replay, b.Replay}, {"recovery", a.Recovery, b.Recovery}} {
		if c.b > c.a {
			out = append(out, fmt.Sprintf("%s +%d", c.name, c.b-c.a))
		}
	}
	return strings.Join(out, ", ")
}

// comparePairs applies the seed's GPU-to-GPU rule across pairs: a pair whose copy ratio is more than
// LinkVariancePct below the best pair's is flagged, so one slow link stands out among healthy ones.
func comparePairs(h *results.Health, r HealthRules, hostFlag func(check, subject, format string, args ...any)) {
	var measured []results.GPUPair
	for _, p := range h.Interconnect.Pairs {
		if p.Uni != nil && p.Uni.Ratio != nil {
			measured = append(measured, p)
		}
	}
	if len(measured) < 2 {
		return
	}
	best := slices.MaxFunc(measured, func(a, b results.GPUPair) int { return cmp.Compare(*a.Uni.Ratio, *b.Uni.Ratio) })
	for _, p := range measured {
		if compare.Outlier(*p.Uni.Ratio, *best.Uni.Ratio, true, r.LinkVariancePct) {
			hostFlag(CheckLinkCompare, pairName(p), "peer copy %.0f GB/s (%.0f %% of its link) is more than %g %% below the best pair (%s: %.0f %% of its link): check this pair's NVLinks",
				p.Uni.GBps, *p.Uni.Ratio*100, r.LinkVariancePct, pairName(best), *best.Uni.Ratio*100)
		}
	}
}

func pairName(p results.GPUPair) string { return fmt.Sprintf("gpu %d ↔ gpu %d", p.A, p.B) }
