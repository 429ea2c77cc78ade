package report

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// linksView is the health section's interconnect: the topology matrix, each GPU's links, the
// peer-copy table against the links' peak, and the all-reduce bus bandwidth.
type linksView struct {
	Source, Error string
	Matrix        [][]string // header row first
	Links         []linkRow
	Pairs         []pairRow
	AllReduce     string // one line: status, NCCL, note or error
	ARSizes       []arRow
	Notes         []string
}

type linkRow struct {
	GPU, Up, Speed, Errors string
	Bad                    bool
}

type pairRow struct {
	Pair, Path, P2P, Peak, Uni, Bi, Error string
	UniClass, BiClass                     string
}

type arRow struct{ Size, Time, AlgBW, BusBW, Ratio, Class string }

func buildLinks(h *results.Health, flaggedPairs map[string]bool) *linksView {
	ic := h.Interconnect
	if ic == nil {
		return nil
	}
	v := &linksView{Source: ic.Source, Error: ic.Error, Matrix: ic.Matrix(len(h.GPUs)), Notes: ic.Notes}
	for _, gl := range ic.Links {
		r := linkRow{GPU: fmt.Sprint(gl.GPU), Up: fmt.Sprintf("%d / %d", gl.Up(), len(gl.Links)),
			Speed: fleetview.LinkSpeed(gl), Errors: "n/a"}
		r.Bad = gl.Up() < len(gl.Links)
		if a, b := gl.ErrorTotals(); a != nil {
			r.Errors = fmt.Sprintf("%d / %d / %d", a.CRC, a.Replay, a.Recovery)
			if b != nil {
				r.Errors += fmt.Sprintf(" → %d / %d / %d", b.CRC, b.Replay, b.Recovery)
				r.Bad = r.Bad || *b != *a
			}
		}
		v.Links = append(v.Links, r)
	}
	for _, p := range ic.Pairs {
		if p.Uni == nil && p.Error == "" && p.Path == "" {
			continue
		}
		name := fmt.Sprintf("%d ↔ %d", p.A, p.B)
		r := pairRow{Pair: name, Path: orDash(p.Path), P2P: orDash(p.P2P), Peak: "—", Uni: pairFig(p.Uni), Bi: pairFig(p.Bi), Error: p.Error}
		if p.PeakGBps > 0 {
			r.Peak = fmt.Sprintf("%.0f GB/s", p.PeakGBps)
		}
		if flaggedPairs[fmt.Sprintf("gpu %d ↔ gpu %d", p.A, p.B)] {
			r.UniClass, r.BiClass = "flag", "flag"
		}
		v.Pairs = append(v.Pairs, r)
	}
	if ar := ic.AllReduce; ar != nil {
		v.AllReduce = "all-reduce: " + string(ar.Status)
		if ar.NCCL != "" {
			v.AllReduce += fmt.Sprintf(" — NCCL %s over %d GPUs, %s (%s)", ar.NCCL, ar.GPUs, ar.Dtype, ar.Lib)
		}
		if ar.PeakGBps > 0 {
			v.AllReduce += fmt.Sprintf("; busbw against %.0f GB/s per GPU", ar.PeakGBps)
		}
		for _, s := range []string{ar.Note, ar.Error} {
			if s != "" {
				v.AllReduce += " — " + s
			}
		}
		for _, s := range ar.Sizes {
			r := arRow{Size: results.SizeText(s.Bytes), Time: fmt.Sprintf("%.1f", s.TimeUs), AlgBW: fmt.Sprintf("%.1f", s.AlgBWGBps), BusBW: fmt.Sprintf("%.1f", s.BusBWGBps), Ratio: "—"}
			if s.BusBWRatio != nil {
				r.Ratio = fmt.Sprintf("%.0f %%", *s.BusBWRatio*100)
			}
			v.ARSizes = append(v.ARSizes, r)
		}
	}
	return v
}

func pairFig(f *results.PairFigure) string {
	if f == nil {
		return "—"
	}
	if f.Ratio == nil {
		return fmt.Sprintf("%.1f", f.GBps)
	}
	return fmt.Sprintf("%.1f · %.0f %%", f.GBps, *f.Ratio*100)
}
