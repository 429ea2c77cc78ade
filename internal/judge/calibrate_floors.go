package judge

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// FloorEntry is one GPU name's datasheet floors derived from healthy runs (reference_floors).
type FloorEntry struct {
	GPU    string
	Floors map[string]float64       // benchmark -> floor
	Ratios map[string][]CalibFigure // benchmark -> the ratios it came from
	Notes  []string
}

// CalibrateFloors derives datasheet floors per exact GPU name from the health phases of healthy
// runs: the worst ratio of each benchmark (and the burn, peer copy and all-reduce) less marginPct,
// rounded down to 0.01. An unusable GPU and a failed figure are left out and said so.
func CalibrateFloors(runs []CalibRun, marginPct float64) []FloorEntry {
	by := floorBook{}
	for _, run := range runs {
		for hi := range run.Summary.Hosts {
			if h := &run.Summary.Hosts[hi]; h.Health != nil {
				by.addHost(run, h)
			}
		}
	}
	var out []FloorEntry
	for _, e := range by {
		for name, figs := range e.Ratios {
			w := worst(figs, true).Value
			e.Floors[name] = math.Floor(w*(1-marginPct/100)*100) / 100
		}
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GPU < out[j].GPU })
	return out
}

// floorBook gathers the ratios behind the floors, by exact GPU name.
type floorBook map[string]*FloorEntry

func (by floorBook) entry(gpu string) *FloorEntry {
	e := by[gpu]
	if e == nil {
		e = &FloorEntry{GPU: gpu, Floors: map[string]float64{}, Ratios: map[string][]CalibFigure{}}
		by[gpu] = e
	}
	return e
}

// add keeps a measured ratio; a missing or zero one says nothing about the floor.
func (by floorBook) add(gpu, name, label string, idx int, ratio *float64) {
	if gpu == "" || ratio == nil || *ratio <= 0 {
		return
	}
	e := by.entry(gpu)
	e.Ratios[name] = append(e.Ratios[name], CalibFigure{Run: label, GPU: idx, Value: *ratio})
}

// addHost takes one host's health phase; the links are filed under its first GPU name.
func (by floorBook) addHost(run CalibRun, h *results.Host) {
	first := ""
	for _, g := range h.Health.GPUs {
		first = cmp.Or(first, g.GPU.Name)
		by.addGPU(run, h, g)
	}
	if ic := h.Health.Interconnect; ic != nil {
		by.addLinks(run, h, ic, first)
	}
}

// addGPU takes one GPU's benchmarks and burn, or says why it is left out.
func (by floorBook) addGPU(run CalibRun, h *results.Host, g results.GPUHealth) {
	name := g.GPU.Name
	if ok, why := calibUsable(run, h, g.GPU.Index); !ok {
		e := by.entry(name)
		e.Notes = append(e.Notes, fmt.Sprintf("%s gpu %d left out: %s", run.Label, g.GPU.Index, why))
		return
	}
	for _, b := range g.Bench {
		if b.Error == "" {
			by.add(name, b.Name, run.Label, g.GPU.Index, b.Ratio)
		}
	}
	if g.Burn != nil && g.Burn.Error == "" {
		by.add(name, results.FloorBurn, run.Label, g.GPU.Index, g.Burn.Ratio)
	}
}

// addLinks takes the peer copies between usable GPUs, and the all-reduce only when every GPU it
// spans is usable.
func (by floorBook) addLinks(run CalibRun, h *results.Host, ic *results.Interconnect, gpu string) {
	for _, p := range ic.Pairs {
		okA, _ := calibUsable(run, h, p.A)
		okB, _ := calibUsable(run, h, p.B)
		if p.Uni != nil && okA && okB {
			by.add(gpu, results.FloorPeerCopy, run.Label, p.A, p.Uni.Ratio)
		}
	}
	if ar := ic.AllReduce; ar != nil && ar.Status == results.StatusOK && len(ar.Sizes) > 0 && allUsable(run, h) {
		by.add(gpu, results.FloorAllReduce, run.Label, -1, ar.Sizes[len(ar.Sizes)-1].BusBWRatio)
	}
}

// allUsable reports whether every GPU of the host's health phase may feed calibration (an
// all-reduce spans them all).
func allUsable(run CalibRun, h *results.Host) bool {
	return !slices.ContainsFunc(h.Health.GPUs, func(g results.GPUHealth) bool { ok, _ := calibUsable(run, h, g.GPU.Index); return !ok })
}

// WriteFloorsYAML prints floor entries as YAML to paste as reference_floors, with the ratios used
// as comments.
func WriteFloorsYAML(w io.Writer, entries []FloorEntry, marginPct float64) error {
	if len(entries) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# datasheet floors: worst ratio to the datasheet peak − %g %%, rounded down to 0.01\n", marginPct)
	b.WriteString("reference_floors:\n")
	order := append(results.MicrobenchNames(), results.FloorBurn, results.FloorPeerCopy, results.FloorAllReduce)
	for _, e := range entries {
		fmt.Fprintf(&b, "  %s:\n", yamlQuote(e.GPU))
		for _, n := range e.Notes {
			fmt.Fprintf(&b, "    # %s\n", n)
		}
		wrote := false
		for _, name := range order {
			figs, ok := e.Ratios[name]
			if !ok {
				continue
			}
			wf := worst(figs, true)
			vals := make([]string, len(figs))
			for i, x := range figs {
				vals[i] = fmt.Sprintf("%.2f", x.Value)
			}
			where := fmt.Sprintf("gpu %d", wf.GPU)
			if wf.GPU < 0 {
				where = "host"
			}
			fmt.Fprintf(&b, "    # %s: worst %.2f (%s %s) of %d: %s\n", name, wf.Value, wf.Run, where, len(figs), strings.Join(vals, ", "))
			fmt.Fprintf(&b, "    %s: %.2f\n", name, e.Floors[name])
			wrote = true
		}
		if !wrote {
			b.WriteString("    {}\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
