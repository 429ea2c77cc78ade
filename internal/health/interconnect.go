package health

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

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
	how := runPairs(ctx, pairs, ic, o.Parallel, func(ab [2]int) {
		o.progress("link %d ↔ %d: peer copy", ab[0], ab[1])
		uni, bi, err := links.PeerCopy(ctx, infos[ab[0]], infos[ab[1]])
		p := pairOf(ic, ab[0], ab[1]) // each measure writes its own pair only
		p.Params = links.Describe()
		if err != nil {
			p.Error = err.Error()
			return
		}
		p.Uni, p.Bi = &results.PairFigure{GBps: uni}, &results.PairFigure{GBps: bi}
	})
	h.Timing = append(h.Timing, results.PhaseTime{Phase: "peer_copy", Seconds: time.Since(start).Seconds(), Schedule: how})
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

// LinkPeaks sets every pair's peak (its NVLinks × their speed, else the PCIe datasheet figure), the
// ratios of the measured copies to it, and the all-reduce's peak and busbw ratios.
func LinkPeaks(h *results.Health, cat *catalog.Catalog) {
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
				p.Uni.Ratio = new(p.Uni.GBps / p.PeakGBps)
			}
			if p.Bi != nil {
				p.Bi.Ratio = new(p.Bi.GBps / (2 * p.PeakGBps))
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
				ar.Sizes[i].BusBWRatio = new(ar.Sizes[i].BusBWGBps / peak)
			}
		}
	}
}

// linkGBps is a link's speed: as read, else the datasheet's per-link figure.
func linkGBps(l results.NVLink, spec catalog.GPU) float64 {
	return nz(l.GBps, spec.NVLinkLinkGBps())
}

// nz is v when it is above zero, else fallback.
func nz[T cmp.Ordered](v, fallback T) T {
	var zero T
	if v > zero {
		return v
	}
	return fallback
}

func firstName(h *results.Health) string {
	if len(h.GPUs) == 0 {
		return ""
	}
	return h.GPUs[0].GPU.Name
}

// addNote adds a note once, so a phase step can run again on a loaded result.
func addNote(gh *results.GPUHealth, note string) {
	if !slices.Contains(gh.Notes, note) {
		gh.Notes = append(gh.Notes, note)
	}
}
