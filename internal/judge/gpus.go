package judge

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// gpuVerdicts decides each GPU's status once, the one every surface shows: the worst of its health
// verdict and the serving verdicts of its endpoints (a GPU-to-GPU comparison undecided is not ok).
func gpuVerdicts(h *results.Host) []results.GPUVerdict {
	b := gpuBook{}
	for _, g := range h.Discovery.GPUs {
		v := b.get(g.Index)
		v.UUID, v.Name = g.UUID, g.Name
	}
	if hh := h.Health; hh != nil {
		for _, g := range hh.GPUs {
			b.addHealth(hh, g)
		}
	}
	for mi := range h.Models {
		m := &h.Models[mi]
		for i := range m.Endpoints {
			ep := &m.Endpoints[i]
			for _, gi := range ep.GPUs {
				addServing(b.get(gi), m.Model, ep)
			}
			b.addUndecidedComparisons(m, ep)
		}
	}
	return b.verdicts()
}

// gpuBook holds the verdicts being built, by GPU index.
type gpuBook map[int]*results.GPUVerdict

func (b gpuBook) get(i int) *results.GPUVerdict {
	if b[i] == nil {
		b[i] = &results.GPUVerdict{Index: i}
	}
	return b[i]
}

// addHealth folds one GPU's health phase into its verdict: its own flags, the health comparisons
// that flagged it, and what a broken or disrupted phase leaves undecided.
func (b gpuBook) addHealth(hh *results.Health, g results.GPUHealth) {
	v := b.get(g.GPU.Index)
	if v.UUID == "" {
		v.UUID, v.Name = g.GPU.UUID, g.GPU.Name
	}
	st, why := gpuHealth(g)
	addGPUEvidence(v, g.Flags)
	for _, br := range healthBreaks(&g) {
		if results.GPULayer(br.layer) {
			addGPUCheck(v, CheckHealthError, actionFor(br.layer))
		}
	}
	for _, w := range why {
		v.Why = appendNew(v.Why, "health: "+w)
	}
	for _, c := range hh.Comparisons {
		for _, cell := range c.Values {
			if cell.GPU == g.GPU.Index && cell.Flagged && !braked(&g) { // braked: the host's (brakeHealth)
				st = results.Worse(st, results.StatusFlag)
				v.Checks = appendNew(v.Checks, "compare.health."+c.Metric)
			}
		}
	}
	v.Health = st
	if hh.Error != "" && hh.Disruption == "" && len(g.Bench) == 0 && g.Status == results.StatusFailed {
		healthBroke(v, hh)
	}
	if hh.Disruption != "" {
		v.Why = appendNew(v.Why, fmt.Sprintf("health: %s: not the GPU's: run again", hh.Disruption))
	}
}

// healthBroke decides a GPU the health phase broke before measuring: failed on the GPU's evidence
// only, so a break in another layer leaves it not proven.
func healthBroke(v *results.GPUVerdict, hh *results.Health) {
	l := errorLayer(hh.ErrorLayer, hh.Error, results.LayerHost)
	if results.GPULayer(l) {
		v.Health = results.StatusFailed // the phase broke in the GPU's own words
		addGPUCheck(v, CheckHealthError, actionFor(l))
		return
	}
	v.Health = results.StatusInconclusive
	v.Why = appendNew(v.Why, fmt.Sprintf("health: not proven: the health phase broke (%s, the %s's): %s", hh.Error, l, results.ActionWords[actionFor(l)]))
}

// addGPUEvidence records the checks of the flags that are about the GPU, and their strongest action.
func addGPUEvidence(v *results.GPUVerdict, flags []results.Flag) {
	for _, f := range flags {
		if results.GPULayer(f.Layer) {
			addGPUCheck(v, f.Check, f.Action)
		}
	}
}

// addGPUCheck records on a GPU's verdict a check of GPU evidence and the action it asks for (the
// most disruptive of them wins).
func addGPUCheck(v *results.GPUVerdict, check, action string) {
	v.Checks = appendNew(v.Checks, check)
	v.Action = results.MoreDisruptive(v.Action, action)
}

// addServing folds an endpoint's serving verdict into one of its GPUs' verdicts.
func addServing(v *results.GPUVerdict, model string, ep *results.Endpoint) {
	v.Name = cmp.Or(v.Name, ep.GPUName)
	st, why := gpuServing(ep)
	v.Serving = results.Worse(cmp.Or(v.Serving, st), st) // not_run ranks below everything, but says more than nothing
	addGPUEvidence(v, ep.Flags)
	if ep.Status != results.StatusInterrupted && ep.Status != results.StatusNotRun && ep.Disruption == "" {
		if l, check, _, action := endpointBroke(ep); results.GPULayer(l) { // it broke in the GPU's own words
			addGPUCheck(v, check, action)
		}
	}
	for _, w := range why {
		v.Why = appendNew(v.Why, model+": "+w)
	}
	for _, vd := range ep.Verdicts {
		if vd.Result == ResultInconclusive {
			v.Why = appendNew(v.Why, fmt.Sprintf("%s: %s: %s", model, vd.Rule, afterInconclusive(vd.Reason)))
		}
	}
}

// addUndecidedComparisons leaves undecided the serving verdict of an endpoint's GPUs when a
// GPU-to-GPU comparison could not decide about it (the endpoint stands as its first GPU).
func (b gpuBook) addUndecidedComparisons(m *results.Model, ep *results.Endpoint) {
	if len(ep.GPUs) == 0 {
		return
	}
	for _, c := range m.Comparisons {
		for _, cell := range c.Values {
			if cell.GPU != ep.GPUs[0] || !(cell.Inconclusive || c.LowConfidence) {
				continue
			}
			why := c.Note
			if cell.Inconclusive {
				why = afterInconclusive(cell.Reason)
			}
			for _, gi := range ep.GPUs {
				v := b.get(gi)
				if v.Serving == results.StatusOK {
					v.Serving = results.StatusInconclusive
				}
				v.Why = appendNew(v.Why, fmt.Sprintf("%s GPU-to-GPU %s: %s", m.Model, c.Metric, why))
			}
		}
	}
}

// verdicts settles each GPU's status, by index: the worse of health and serving.
func (b gpuBook) verdicts() []results.GPUVerdict {
	out := make([]results.GPUVerdict, 0, len(b))
	for _, i := range slices.Sorted(maps.Keys(b)) {
		v := b[i]
		v.Status = results.Worse(v.Health, v.Serving)
		if v.Serving == results.StatusNotRun && (v.Status == results.StatusOK || v.Status == "") {
			v.Status = results.StatusNotRun // healthy, but never served: not a pass
		}
		v.Status = cmp.Or(v.Status, results.StatusSkipped)
		if v.Status != results.StatusInconclusive {
			v.Why = nil // decided: what left a figure open is in the caveats, not the verdict
		}
		out = append(out, *v)
	}
	return out
}

// gpuHealth is a GPU's health verdict on GPU evidence: its GPU and interconnect flags flag it (or
// fail it, for the rules that fail a GPU); a host finding on it (busy) leaves it not proven.
func gpuHealth(g results.GPUHealth) (results.Status, []string) {
	st := g.Status
	var why []string
	if st == results.StatusFlag || st == results.StatusFailed {
		st = results.StatusOK // re-derived: what failed it, and its flags, each by its layer
		for _, b := range healthBreaks(&g) {
			if results.GPULayer(b.layer) {
				st = results.Worse(st, results.StatusFailed) // it broke in the GPU's own words
				continue
			}
			st = results.Worse(st, results.StatusInconclusive)
			why = append(why, notProven(clipText(b.what, 300), b.layer, actionFor(b.layer)))
		}
	}
	for _, f := range g.Flags {
		if results.GPULayer(f.Layer) {
			st = results.Worse(st, flagStatus(f))
		} else {
			st = results.Worse(st, results.StatusInconclusive)
			why = append(why, notProven(f.Reason, f.Layer, f.Action))
		}
	}
	return st, why
}

// notProven is why a finding of a layer other than the GPU's leaves the GPU not proven.
func notProven(what, layer, action string) string {
	return fmt.Sprintf("not proven: %s (the %s's: %s)", what, layer, results.ActionWords[action])
}

// gpuServing is the verdict an endpoint gives its GPUs on GPU evidence: its GPU-layer findings flag
// or fail them; another layer's failure or an undecided gate leaves them inconclusive.
func gpuServing(ep *results.Endpoint) (results.Status, []string) {
	switch ep.Status {
	case results.StatusInterrupted, results.StatusNotRun:
		return ep.Status, nil
	}
	st := results.StatusSkipped
	if ep.Load != nil || ep.Functional != nil {
		st = results.StatusOK
	}
	var why []string
	unproven := func(layer, what, action string) {
		st = results.Worse(st, results.StatusInconclusive)
		why = appendNew(why, notProven(clipText(what, 300), layer, action))
	}
	for _, f := range ep.Flags {
		if results.GPULayer(f.Layer) {
			st = results.Worse(st, flagStatus(f))
		} else if failingFlag(f) || f.Layer == results.LayerHost || f.Check == CheckAppXIDLoad {
			unproven(f.Layer, f.Reason, f.Action) // an application-class XID happened on the GPU: a rerun decides
		}
	}
	switch {
	case ep.Disruption != "":
		unproven(results.LayerInfra, ep.Disruption+": not the GPU's", results.ActionRerun)
	default:
		switch l, _, what, action := endpointBroke(ep); {
		case results.GPULayer(l):
			st = results.Worse(st, results.StatusFailed)
		case l != "":
			unproven(l, what, action)
		}
	}
	if ep.Functional != nil && ep.Functional.Error != "" {
		unproven(results.LayerEngine, "the API suite could not run: "+ep.Functional.Error, results.ActionFixEngine)
	}
	if st == results.StatusOK && undecided(ep) {
		st = results.StatusInconclusive
	}
	return st, why
}

// appendNew appends s unless it is empty or already there: a judge run again on a loaded result
// adds nothing twice.
func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// afterInconclusive keeps the why of a reason ("… : inconclusive, <why>").
func afterInconclusive(r string) string {
	for _, sep := range []string{"inconclusive, not flagged: ", "inconclusive, ", "but inconclusive; "} {
		if _, why, ok := strings.Cut(r, sep); ok {
			return why
		}
	}
	return r
}
