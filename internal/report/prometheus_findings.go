package report

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// maxFindingSeries bounds gpuvet_finding: a run with many findings must not flood the textfile
// (gpuvet_findings_omitted counts what was left out).
const maxFindingSeries = 200

// promFindings writes the judge's findings by layer: one gpuvet_finding series per finding (its
// host, layer, check, status, action and GPUs), each host's and the run's layers as statuses,
// and the action each host and GPU asks for.
func promFindings(d *promDoc, s *results.Summary) {
	f := d.family("gpuvet_finding", "A finding of the run (a check that did not pass), value always 1: its layer (gpu, interconnect, host, engine, client, infrastructure), status (failed, flag, inconclusive) and the action it asks for.")
	seen := map[string]bool{}
	omitted := 0
	for _, x := range s.Findings {
		l := []string{"host", x.Host, "layer", x.Layer, "check", x.Check, "status", string(x.Status), "action", x.Action, "gpu", gpuLabel(x.GPUs)}
		key := strings.Join(l, "\x00")
		if seen[key] { // two findings of one check on one subject are one series
			continue
		}
		if len(seen) >= maxFindingSeries {
			omitted++
			continue
		}
		seen[key] = true
		f.add(1, l...)
	}
	if omitted > 0 {
		d.family("gpuvet_findings_omitted", "Findings not written as gpuvet_finding series (over the bound of 200 series).").add(float64(omitted))
	}
	rl := d.family("gpuvet_run_layer_status", "The run's worst status of each layer with a finding: "+statusScale+".")
	for _, l := range orderedLayers(s.Layers) {
		rl.status(s.Layers[l], "layer", l)
	}
	if s.Action != "" {
		d.family("gpuvet_run_action", "The most disruptive action the run's hardware findings ask for (value always 1).").add(1, "action", s.Action)
	}
	for _, h := range s.Hosts {
		hl := d.family("gpuvet_layer_status", "A host's worst status of each layer with a finding: "+statusScale+".")
		for _, l := range orderedLayers(h.Layers) {
			hl.status(h.Layers[l], "host", h.Name, "layer", l)
		}
		if h.HardwareStatus != "" {
			d.family("gpuvet_host_hardware_status", "A host's hardware status (the worst of its gpu, interconnect and host layers): "+statusScale+".").status(h.HardwareStatus, "host", h.Name)
		}
		if h.Action != "" {
			d.family("gpuvet_action", "The most disruptive action a host's hardware findings ask for (value always 1): none, rerun, fix-engine, calibrate, reset-gpu, reboot-node, drain-rma.").add(1, "host", h.Name, "action", h.Action)
		}
		for _, g := range h.GPUs {
			if g.Action != "" {
				d.family("gpuvet_gpu_action", "The most disruptive action a GPU's own findings ask for (value always 1).").add(1, "host", h.Name, "gpu", strconv.Itoa(g.Index), "action", g.Action)
			}
		}
	}
}

// gpuLabel is a list of GPU indices as one label value ("1,3"; "" for none).
func gpuLabel(gpus []int) string {
	gs := make([]string, len(gpus))
	for i, g := range gpus {
		gs[i] = strconv.Itoa(g)
	}
	return strings.Join(gs, ",")
}

// orderedLayers are the layers of m in results.Layers order, then any other, sorted.
func orderedLayers(m map[string]results.Status) []string {
	var out []string
	for _, l := range results.Layers {
		if _, ok := m[l]; ok {
			out = append(out, l)
		}
	}
	for _, l := range sortedKeys(m) {
		if !slices.Contains(results.Layers, l) {
			out = append(out, l)
		}
	}
	return out
}
