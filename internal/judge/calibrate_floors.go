package judge

import (
	"fmt"
	"io"
	"math"
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
// runs: the worst ratio of each benchmark (and the burn, peer copy and all-reduce) less marginPct
// (results.FloorMarginPct by default), rounded down to 0.01. A GPU that was busy, and a figure
// that failed, are left out and said so.
func CalibrateFloors(runs []CalibRun, marginPct float64) []FloorEntry {
	by := map[string]*FloorEntry{}
	add := func(gpu, name, label string, idx int, ratio *float64) {
		if gpu == "" || ratio == nil || *ratio <= 0 {
			return
		}
		e := by[gpu]
		if e == nil {
			e = &FloorEntry{GPU: gpu, Floors: map[string]float64{}, Ratios: map[string][]CalibFigure{}}
			by[gpu] = e
		}
		e.Ratios[name] = append(e.Ratios[name], CalibFigure{Run: label, GPU: idx, Value: *ratio})
	}
	for _, run := range runs {
		for hi := range run.Summary.Hosts {
			h := &run.Summary.Hosts[hi]
			hh := h.Health
			if hh == nil {
				continue
			}
			first := ""
			for _, g := range hh.GPUs {
				name := g.GPU.Name
				if first == "" {
					first = name
				}
				if ok, why := calibUsable(run, h, g.GPU.Index); !ok {
					note := fmt.Sprintf("%s gpu %d left out: %s", run.Label, g.GPU.Index, why)
					if e := by[name]; e != nil {
						e.Notes = append(e.Notes, note)
					} else {
						by[name] = &FloorEntry{GPU: name, Floors: map[string]float64{}, Ratios: map[string][]CalibFigure{}, Notes: []string{note}}
					}
					continue
				}
				for _, b := range g.Bench {
					if b.Error == "" {
						add(name, b.Name, run.Label, g.GPU.Index, b.Ratio)
					}
				}
				if g.Burn != nil && g.Burn.Error == "" {
					add(name, results.FloorBurn, run.Label, g.GPU.Index, g.Burn.Ratio)
				}
			}
			if ic := hh.Interconnect; ic != nil {
				for _, p := range ic.Pairs {
					okA, _ := calibUsable(run, h, p.A)
					okB, _ := calibUsable(run, h, p.B)
					if p.Uni != nil && okA && okB {
						add(first, results.FloorPeerCopy, run.Label, p.A, p.Uni.Ratio)
					}
				}
				if ar := ic.AllReduce; ar != nil && ar.Status == results.StatusOK && len(ar.Sizes) > 0 && allUsable(run, h) {
					add(first, results.FloorAllReduce, run.Label, -1, ar.Sizes[len(ar.Sizes)-1].BusBWRatio)
				}
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

// allUsable reports whether every GPU of the host's health phase may feed calibration (an
// all-reduce spans them all).
func allUsable(run CalibRun, h *results.Host) bool {
	for _, g := range h.Health.GPUs {
		if ok, _ := calibUsable(run, h, g.GPU.Index); !ok {
			return false
		}
	}
	return true
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
