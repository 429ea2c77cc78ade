package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Node scale (issue 34): with Options.Parallel the health phase takes about one GPU's time, not
// one per GPU. What uses only the GPU itself (GEMMs, the HBM copy, the burn) runs on every GPU at
// once; what crosses a link another GPU may share runs at once only where the topology says it
// does not share one: PCIe copies in waves of GPUs whose common PCIe ancestor is above their
// switches (PHB, NODE, SYS: separate root ports), peer copies in rounds of NVLink pairs with no
// GPU in common. Where the topology is not known they run one at a time, and the timing says so.

// isPCIe says a benchmark crosses the GPU's PCIe link to the host.
func isPCIe(name string) bool { return strings.HasPrefix(name, "pcie_") }

// sharesUplink says two GPUs whose PCIe common ancestor is path share a link to the host: under
// one switch (PIX) or one tree of switches (PXB). "" (not known) is taken as shared.
func sharesUplink(path string) bool {
	return !slices.Contains([]string{"PHB", "NODE", "SYS", "SOC"}, path)
}

// pcieAncestor is the PCIe common ancestor of GPUs a and b as the interconnect says it: the pair's
// PCIePath, or its path when that is PCIe; "" when not known.
func pcieAncestor(ic *results.Interconnect, a, b int) string {
	if ic == nil {
		return ""
	}
	for _, p := range ic.Pairs {
		if p.A == min(a, b) && p.B == max(a, b) || p.A == max(a, b) && p.B == min(a, b) {
			if p.PCIePath != "" {
				return p.PCIePath
			}
			if results.PathIsPCIe(p.Path) {
				return p.Path
			}
		}
	}
	return ""
}

// pcieWaves groups the GPUs (positions in h.GPUs) into waves whose members share no PCIe uplink,
// first fit in index order; one GPU is always a wave of its own. The note says how it was decided.
func pcieWaves(h *results.Health) ([][]int, string) {
	n := len(h.GPUs)
	var waves [][]int
	unknown := false
	for i := 0; i < n; i++ {
		w := slices.IndexFunc(waves, func(wave []int) bool { // the first wave none of whose GPUs shares an uplink with i
			return !slices.ContainsFunc(wave, func(j int) bool {
				path := pcieAncestor(h.Interconnect, h.GPUs[i].GPU.Index, h.GPUs[j].GPU.Index)
				unknown = unknown || path == ""
				return sharesUplink(path)
			})
		})
		if w < 0 {
			waves = append(waves, []int{i})
		} else {
			waves[w] = append(waves[w], i)
		}
	}
	switch {
	case n <= 1:
		return waves, "1 GPU"
	case len(waves) == 1:
		return waves, fmt.Sprintf("%d GPUs at once (no two share a PCIe switch)", n)
	case len(waves) == n && unknown:
		return waves, "one GPU at a time (the PCIe topology is not known)"
	case len(waves) == n:
		return waves, "one GPU at a time (they share PCIe switches)"
	}
	return waves, fmt.Sprintf("%d waves of GPUs that share no PCIe switch", len(waves))
}

// pairRounds groups the pairs to measure into rounds that share no link: NVLink pairs with no GPU in
// common run together (each GPU's links are its own, and an NVSwitch does not block); a pair over
// PCIe runs alone. The note says how it was decided.
func pairRounds(pairs [][2]int, ic *results.Interconnect) ([][][2]int, string) {
	var rounds [][][2]int
	var nvl []bool // round is NVLink pairs only
	alone := 0
next:
	for _, ab := range pairs {
		isNV := false
		if ic != nil {
			for _, p := range ic.Pairs {
				if p.A == ab[0] && p.B == ab[1] {
					isNV = p.NVLinks > 0 || strings.HasPrefix(p.Path, "NV")
				}
			}
		}
		if !isNV {
			rounds, nvl = append(rounds, [][2]int{ab}), append(nvl, false)
			alone++
			continue
		}
		for r := range rounds {
			if nvl[r] && !slices.ContainsFunc(rounds[r], func(q [2]int) bool {
				return q[0] == ab[0] || q[0] == ab[1] || q[1] == ab[0] || q[1] == ab[1]
			}) {
				rounds[r] = append(rounds[r], ab)
				continue next
			}
		}
		rounds, nvl = append(rounds, [][2]int{ab}), append(nvl, true)
	}
	switch {
	case len(pairs) <= 1:
		return rounds, fmt.Sprintf("%d pair", len(pairs))
	case alone == len(pairs):
		return rounds, "one pair at a time (over PCIe, or links not known)"
	case alone > 0:
		return rounds, fmt.Sprintf("%d rounds: NVLink pairs with no GPU in common at once, %d pair(s) over PCIe alone", len(rounds), alone)
	}
	return rounds, fmt.Sprintf("%d rounds of NVLink pairs with no GPU in common", len(rounds))
}

// runBenchSteps measures the microbenchmarks: one GPU after another without Parallel (as the seed
// does), else the GPU-local ones on every GPU at once and PCIe in waves; each step's time goes to
// h.Timing.
func runBenchSteps(ctx context.Context, bench BenchRunner, h *results.Health, o Options) {
	if !o.Parallel {
		step(h, "benchmarks", "one GPU at a time", func() {
			forEachGPU(ctx, h, o, func(gh *results.GPUHealth) { runBenches(ctx, bench, gh, o, nil) })
		})
		return
	}
	step(h, "gemm_hbm", fmt.Sprintf("%d GPUs at once", len(h.GPUs)), func() {
		forEachGPU(ctx, h, o, func(gh *results.GPUHealth) {
			runBenches(ctx, bench, gh, o, func(name string) bool { return !isPCIe(name) })
		})
	})
	waves, how := pcieWaves(h)
	step(h, "pcie", how, func() {
		for _, w := range waves {
			if ctx.Err() != nil {
				return
			}
			forGPUs(ctx, h, o, w, func(gh *results.GPUHealth) { runBenches(ctx, bench, gh, o, isPCIe) })
		}
	})
	for i := range h.GPUs { // the benchmarks in their usual order, whatever order they ran in
		slices.SortStableFunc(h.GPUs[i].Bench, func(a, b results.Microbench) int {
			return slices.Index(results.MicrobenchNames(), a.Name) - slices.Index(results.MicrobenchNames(), b.Name)
		})
	}
}

// forGPUs runs f on the GPUs at positions idx of h.GPUs at once (forEachGPU's binding for each).
func forGPUs(ctx context.Context, h *results.Health, o Options, idx []int, f func(*results.GPUHealth)) {
	sub := &results.Health{GPUs: make([]results.GPUHealth, len(idx))}
	for k, i := range idx {
		sub.GPUs[k] = h.GPUs[i]
	}
	po := o
	po.Parallel = true
	forEachGPU(ctx, sub, po, f)
	for k, i := range idx {
		h.GPUs[i] = sub.GPUs[k]
	}
}

// runPairs measures every pair's copies in rounds (pairRounds), each round's pairs at once.
func runPairs(ctx context.Context, pairs [][2]int, ic *results.Interconnect, parallel bool, measure func([2]int)) string {
	if !parallel {
		for _, ab := range pairs {
			if ctx.Err() != nil {
				break
			}
			measure(ab)
		}
		return "one pair at a time"
	}
	rounds, how := pairRounds(pairs, ic)
	for _, r := range rounds {
		if ctx.Err() != nil {
			break
		}
		var wg sync.WaitGroup
		for _, ab := range r {
			wg.Add(1)
			go func() { defer wg.Done(); measure(ab) }()
		}
		wg.Wait()
	}
	return how
}

// step runs fn and records its wall time as one health step.
func step(h *results.Health, name, schedule string, fn func()) {
	start := time.Now()
	fn()
	h.Timing = append(h.Timing, results.PhaseTime{Phase: name, Seconds: time.Since(start).Seconds(), Schedule: schedule})
}
