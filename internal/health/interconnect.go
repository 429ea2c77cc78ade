package health

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Check ids of the interconnect rules.
const (
	CheckNVLinkDown   = "health.nvlink_down"   // a link down: failure
	CheckNVLinkErrors = "health.nvlink_errors" // error counters grew during the phase: failure
	CheckNVLinkPath   = "health.nvlink_path"   // a pair on PCIe where the model ships NVLink
	CheckP2PAccess    = "health.p2p_access"    // peer access unavailable
	CheckP2PBandwidth = "health.p2p_bandwidth" // a pair's copy bandwidth low against its link
	CheckAllReduce    = "health.all_reduce"    // all-reduce bus bandwidth low against the links
	CheckLinkCompare  = "compare.link_to_link" // one pair slower than the others
)

// failingChecks are the rules whose flag makes a GPU failed, not just flagged.
var failingChecks = map[string]bool{CheckNVLinkDown: true, CheckNVLinkErrors: true, CheckResults: true}

// LinkRunner measures GPU-to-GPU bandwidth: cuda.Peer on a host, SimLinks on the simulator.
type LinkRunner interface {
	// PeerCopy measures a → b (uni) and both ways at once (bi), GB/s. ErrNoPeer-like errors say why.
	PeerCopy(ctx context.Context, a, b results.GPUInfo) (uni, bi float64, err error)
	// AllReduce runs an all-reduce over gpus at each size (bytes); Status skipped with a Note when no
	// NCCL is found.
	AllReduce(ctx context.Context, gpus []results.GPUInfo, sizes []int64) (*results.AllReduce, error)
	Describe() string
}

// AllReduceSizes are the all-reduce message sizes, as nccl-tests' all_reduce_perf -b 1M -e 1G -f 16
// runs them: small messages show latency, the largest the links' bus bandwidth.
var AllReduceSizes = []int64{1 << 20, 16 << 20, 256 << 20, 1 << 30}

// ringAbove is the GPU count above which only ring neighbours (i, i+1) are measured: all pairs of
// 8 GPUs would be 28 measurements; the ring's 8 cross every GPU's links both ways.
const ringAbove = 4

// readInterconnect reads the topology at inventory, when the source knows it.
func readInterconnect(src gpu.Source, h *results.Health) {
	l, ok := src.(gpu.Linker)
	if !ok || len(h.GPUs) == 0 {
		return
	}
	ic, err := l.Interconnect()
	if err != nil {
		h.Interconnect = &results.Interconnect{Source: h.Source, Error: fmt.Sprintf("reading the interconnect: %v", err)}
		return
	}
	h.Interconnect = ic
}

// rereadLinkErrors reads the NVLink error counters again at the end of the phase, so counters that
// grew under the benchmarks and the burn are caught.
func rereadLinkErrors(src gpu.Source, h *results.Health) {
	l, ok := src.(gpu.Linker)
	if !ok || h.Interconnect == nil || h.Interconnect.Error != "" {
		return
	}
	now, err := l.Interconnect()
	if err != nil {
		h.Interconnect.Notes = append(h.Interconnect.Notes, fmt.Sprintf("NVLink error counters not read again at the end: %v", err))
		return
	}
	after := map[[2]int]*results.LinkErrors{}
	for _, gl := range now.Links {
		for _, l := range gl.Links {
			after[[2]int{gl.GPU, l.Link}] = l.Errors
		}
	}
	for i := range h.Interconnect.Links {
		gl := &h.Interconnect.Links[i]
		for j := range gl.Links {
			gl.Links[j].ErrorsAfter = after[[2]int{gl.GPU, gl.Links[j].Link}]
		}
	}
}

// measurePairs picks the pairs to measure: all of them up to ringAbove GPUs, ring neighbours above.
func measurePairs(n int) [][2]int {
	var out [][2]int
	if n <= ringAbove {
		for a := 0; a < n; a++ {
			for b := a + 1; b < n; b++ {
				out = append(out, [2]int{a, b})
			}
		}
		return out
	}
	for a := 0; a < n; a++ {
		b := (a + 1) % n
		out = append(out, [2]int{min(a, b), max(a, b)})
	}
	return out
}

// runLinks measures the peer copies and the all-reduce and sets each beside its link's peak.
func runLinks(ctx context.Context, links LinkRunner, h *results.Health, o Options) {
	n := len(h.GPUs)
	if n < 2 {
		return
	}
	if h.Interconnect == nil {
		h.Interconnect = &results.Interconnect{Source: h.Source, Notes: []string{"topology not read (this source has none): bandwidth is measured against the datasheet"}}
	}
	ic := h.Interconnect
	infos := make([]results.GPUInfo, n)
	for i, gh := range h.GPUs {
		infos[i] = gh.GPU
	}
	if n > ringAbove {
		ic.Notes = append(ic.Notes, fmt.Sprintf("%d GPUs: peer copies measured between ring neighbours (i, i+1) only", n))
	}
	start := time.Now()
	pairs := measurePairs(n)
	for _, ab := range pairs {
		pairOf(ic, ab[0], ab[1]) // every pair in place before any is measured: measures may run at once
	}
	type figures struct {
		uni, bi float64
		err     error
	}
	var mu sync.Mutex
	got := map[[2]int]figures{}
	how := runPairs(ctx, pairs, ic, o.Parallel, func(ab [2]int) {
		o.progress("link %d ↔ %d: peer copy", ab[0], ab[1])
		uni, bi, err := links.PeerCopy(ctx, infos[ab[0]], infos[ab[1]])
		mu.Lock()
		got[ab] = figures{uni, bi, err}
		mu.Unlock()
	})
	h.Timing = append(h.Timing, results.PhaseTime{Phase: "peer_copy", Seconds: time.Since(start).Seconds(), Schedule: how})
	for _, ab := range pairs {
		f, ok := got[ab]
		if !ok {
			continue // interrupted before it ran
		}
		p := pairOf(ic, ab[0], ab[1])
		p.Params = links.Describe()
		if f.err != nil {
			p.Error = f.err.Error()
			continue
		}
		p.Uni, p.Bi = &results.PairFigure{GBps: f.uni}, &results.PairFigure{GBps: f.bi}
	}
	if ctx.Err() != nil {
		return
	}
	o.progress("all-reduce over %d GPUs", n)
	start = time.Now()
	ar, err := links.AllReduce(ctx, infos, AllReduceSizes)
	h.Timing = append(h.Timing, results.PhaseTime{Phase: "all_reduce", Seconds: time.Since(start).Seconds(), Schedule: fmt.Sprintf("%d GPUs together", n)})
	if err != nil {
		if ar == nil {
			ar = &results.AllReduce{}
		}
		ar.Status, ar.Error = results.StatusFailed, err.Error()
	}
	ic.AllReduce = ar
}

// pairOf finds (or adds, in order) the pair a–b.
func pairOf(ic *results.Interconnect, a, b int) *results.GPUPair {
	for i := range ic.Pairs {
		if ic.Pairs[i].A == a && ic.Pairs[i].B == b {
			return &ic.Pairs[i]
		}
	}
	ic.Pairs = append(ic.Pairs, results.GPUPair{A: a, B: b})
	sort.Slice(ic.Pairs, func(i, j int) bool {
		return ic.Pairs[i].A < ic.Pairs[j].A || ic.Pairs[i].A == ic.Pairs[j].A && ic.Pairs[i].B < ic.Pairs[j].B
	})
	return pairOf(ic, a, b)
}

// linkPeaks sets every pair's peak (its NVLinks × their speed, else the PCIe datasheet figure), the
// ratios of the measured copies to it, and the all-reduce's peak and busbw ratios.
func linkPeaks(h *results.Health, cat *catalog.Catalog) {
	ic := h.Interconnect
	if ic == nil {
		return
	}
	spec, known := cat.LookupGPU(firstName(h))
	speed := map[int]float64{} // GPU -> mean speed of its up links
	total := map[int]float64{} // GPU -> sum of its up links' speeds
	for _, gl := range ic.Links {
		up := 0
		for _, l := range gl.Links {
			if l.Up {
				total[gl.GPU] += linkGBps(l, spec)
				up++
			}
		}
		if up > 0 {
			speed[gl.GPU] = total[gl.GPU] / float64(up)
		}
	}
	for i := range ic.Pairs {
		p := &ic.Pairs[i]
		switch {
		case p.NVLinks > 0:
			s := min(nz(speed[p.A], spec.NVLinkLinkGBps()), nz(speed[p.B], spec.NVLinkLinkGBps()))
			p.PeakGBps = float64(p.NVLinks) * s
		case known && spec.PCIeGBps() > 0:
			p.PeakGBps = spec.PCIeGBps()
		}
		if p.PeakGBps > 0 {
			if p.Uni != nil {
				p.Uni.Ratio = ptr(p.Uni.GBps / p.PeakGBps)
			}
			if p.Bi != nil {
				p.Bi.Ratio = ptr(p.Bi.GBps / (2 * p.PeakGBps))
			}
		}
	}
	if ar := ic.AllReduce; ar != nil {
		peak := 0.0
		for _, gh := range h.GPUs {
			t := total[gh.GPU.Index]
			switch {
			case t > 0:
			case len(ic.Links) == 0 && known && spec.NVLinkGBps > 0:
				t = spec.NVLinkGBps // links not read: the datasheet's
			case known:
				t = spec.PCIeGBps() // no NVLink up on this GPU: its traffic crosses PCIe
			}
			if t > 0 && (peak == 0 || t < peak) {
				peak = t
			}
		}
		ar.PeakGBps = peak
		for i := range ar.Sizes {
			if peak > 0 {
				ar.Sizes[i].BusBWRatio = ptr(ar.Sizes[i].BusBWGBps / peak)
			}
		}
	}
}

// linkGBps is a link's speed: as read, else the datasheet's per-link figure.
func linkGBps(l results.NVLink, spec catalog.GPU) float64 {
	return nz(l.GBps, spec.NVLinkLinkGBps())
}

func nz(v, fallback float64) float64 {
	if v > 0 {
		return v
	}
	return fallback
}

// linkFloor is the floor of a peer copy or all-reduce: --min-link-ratio when set, else the datasheet
// floor of the host's GPU model.
func (o *Options) linkFloor(gpuName, name string) float64 {
	if o.MinLinkRatio > 0 {
		return o.MinLinkRatio
	}
	return o.Floor(gpuName, name)
}

func firstName(h *results.Health) string {
	if len(h.GPUs) == 0 {
		return ""
	}
	return h.GPUs[0].GPU.Name
}

// judgeInterconnect turns the interconnect into flags: links down and error counters that grew on
// their GPU (failures), pairs on PCIe, without peer access, or slow against their link, and a slow
// all-reduce on the host.
func judgeInterconnect(h *results.Health, o Options) {
	ic := h.Interconnect
	if ic == nil {
		return
	}
	linkPeaks(h, o.Catalog)
	byIndex := map[int]*results.GPUHealth{}
	for i := range h.GPUs {
		byIndex[h.GPUs[i].GPU.Index] = &h.GPUs[i]
	}
	for _, gl := range ic.Links {
		if gh := byIndex[gl.GPU]; gh != nil {
			judgeLinks(gh, gl)
		}
	}
	hostFlag := func(check, subject, format string, args ...any) {
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: subject, Check: check, Reason: fmt.Sprintf(format, args...)})
	}
	spec, known := o.Catalog.LookupGPU(firstName(h))
	shipsNVLink := known && spec.NVLinks() > 0
	for _, p := range ic.Pairs {
		subj := pairName(p)
		if gpu.PathIsPCIe(p.Path) && shipsNVLink {
			hostFlag(CheckNVLinkPath, subj, "the GPUs reach each other over PCIe (%s) though the %s ships with %d NVLinks: TP across them runs at PCIe speed; check `nvidia-smi topo -m`, the NVLink bridges/baseboard and the fabric manager", p.Path, spec.Key, spec.NVLinks())
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
		}{{"unidirectional", p.Uni}, {"bidirectional", p.Bi}} {
			if fl := o.linkFloor(firstName(h), results.FloorPeerCopy); f.fig != nil && f.fig.Ratio != nil && *f.fig.Ratio < fl {
				hostFlag(CheckP2PBandwidth, subj, "peer copy %s %.0f GB/s, %.0f %% of the link's %.0f GB/s (floor %.0f %%): check the links' state, speed and error counters (`nvidia-smi nvlink -s -e`)",
					f.name, f.fig.GBps, *f.fig.Ratio*100, peakOf(p, f.name), fl*100)
			}
		}
	}
	comparePairs(h, o, hostFlag)
	if ar := ic.AllReduce; ar != nil && ar.Status == results.StatusOK && len(ar.Sizes) > 0 {
		big := ar.Sizes[len(ar.Sizes)-1]
		if fl := o.linkFloor(firstName(h), results.FloorAllReduce); big.BusBWRatio != nil && *big.BusBWRatio < fl {
			hostFlag(CheckAllReduce, "host", "all-reduce bus bandwidth %.0f GB/s at %s, %.0f %% of the links' %.0f GB/s per GPU (floor %.0f %%): a slow link or a PCIe fallback on one GPU holds every rank back",
				big.BusBWGBps, results.SizeText(big.Bytes), *big.BusBWRatio*100, ar.PeakGBps, fl*100)
		}
	}
}

func peakOf(p results.GPUPair, dir string) float64 {
	if dir == "bidirectional" {
		return 2 * p.PeakGBps
	}
	return p.PeakGBps
}

// judgeLinks flags a GPU's links that are down and error counters that grew.
func judgeLinks(gh *results.GPUHealth, gl results.GPULinks) {
	flag := func(check, format string, args ...any) {
		gh.Flags = append(gh.Flags, results.Flag{Scope: "gpu", Subject: subject(gh.GPU), Check: check, Reason: fmt.Sprintf(format, args...)})
	}
	var down []string
	up := 0
	for _, l := range gl.Links {
		if !l.Up {
			down = append(down, fmt.Sprint(l.Link))
		} else {
			up++
		}
		if l.Errors != nil && l.ErrorsAfter != nil {
			if d := growth(*l.Errors, *l.ErrorsAfter); d != "" {
				flag(CheckNVLinkErrors, "NVLink %d error counters grew during the health phase (%s): a marginal link; reseat or service the baseboard, and check `nvidia-smi nvlink -e -i %d`", l.Link, d, gh.GPU.Index)
			}
		}
		if l.Errors != nil && (l.Errors.CRC > 0 || l.Errors.Replay > 0 || l.Errors.Recovery > 0) {
			addNote(gh, fmt.Sprintf("NVLink %d has error counts since the driver loaded (CRC %d, replay %d, recovery %d)", l.Link, l.Errors.CRC, l.Errors.Replay, l.Errors.Recovery))
		}
	}
	if len(down) > 0 {
		flag(CheckNVLinkDown, "NVLink %s down (%d of %d up): the GPU's peer bandwidth drops by that share; check `nvidia-smi nvlink -s -i %d`, the fabric manager, then reseat or RMA",
			strings.Join(down, ", "), up, len(gl.Links), gh.GPU.Index)
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

// comparePairs applies the GPU-to-GPU rule across pairs: a pair whose copy ratio is more than
// LinkVariancePct below the best pair's is flagged, so one slow link stands out among healthy ones.
func comparePairs(h *results.Health, o Options, hostFlag func(check, subject, format string, args ...any)) {
	var measured []results.GPUPair
	for _, p := range h.Interconnect.Pairs {
		if p.Uni != nil && p.Uni.Ratio != nil {
			measured = append(measured, p)
		}
	}
	if len(measured) < 2 {
		return
	}
	best := measured[0]
	for _, p := range measured[1:] {
		if *p.Uni.Ratio > *best.Uni.Ratio {
			best = p
		}
	}
	for _, p := range measured {
		if compare.Outlier(*p.Uni.Ratio, *best.Uni.Ratio, true, o.LinkVariancePct) {
			hostFlag(CheckLinkCompare, pairName(p), "peer copy %.0f GB/s (%.0f %% of its link) is more than %g %% below the best pair (%s: %.0f %% of its link): check this pair's NVLinks",
				p.Uni.GBps, *p.Uni.Ratio*100, o.LinkVariancePct, pairName(best), *best.Uni.Ratio*100)
		}
	}
}

func pairName(p results.GPUPair) string { return fmt.Sprintf("gpu %d ↔ gpu %d", p.A, p.B) }
