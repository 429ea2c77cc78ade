package term

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Summary prints the run's outcome: one row per endpoint with the figures the gates read (marked
// where they cannot decide), the findings, then the caveats and the other blocks, one line each. A
// fleet of more than FleetTableHosts hosts gets the compact fleet block instead (fleet.go).
func Summary(w io.Writer, s *results.Summary) {
	if Compact(s) {
		fleetSummary(w, s)
		return
	}
	// A fleet's summary (many hosts) gets a HOST column: GPU 0 is on every host.
	fleet := s.Fleet != nil
	header := []string{"MODEL", "GPU", "STATUS", "SYNC TTFT p95", "SYNC ITL p95", "PEAK tok/s", "% SOL", "SUSTAINED req/s", "POWER mean", "tok/J", "API SUITE", "READY IN", "NOTE"}
	if fleet {
		header = append([]string{"HOST"}, header...)
	}
	t := NewTable(w, header...)
	row := func(host string, cells ...string) {
		if fleet {
			cells = append([]string{host}, cells...)
		}
		t.Row(cells...)
	}
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			if len(m.Endpoints) == 0 { // the error is in the failures block: a table cell is no place for it
				note := ""
				if m.Error != "" {
					note = "failed: see below"
				}
				row(h.Name, m.Model, "-", string(m.Status), "", "", "", "", "", "", "", "", "", note)
			}
			for _, e := range m.Endpoints {
				l, p := cmp.Or(e.Load, &results.Load{}), cmp.Or(e.Power, &results.Power{}) // none: no figures
				row(h.Name, m.Model, GPUList(e.GPUs), string(GPUStatus(h, e)),
					syncMs(l, func(r results.Run) results.Dist { return r.TTFT }),
					syncMs(l, func(r results.Run) results.Dist { return r.ITL }),
					peak(l), sol(e.SpeedOfLight), figure(l.SustainedReqS, "%.1f"), figure(p.MeanW, "%.0f W"), figure(p.TokensPerJoule, "%.2f"),
					suite(e.Functional), figure(e.ProvisionSeconds, "%.1f s"), note(h, e))
			}
		}
	}
	t.Flush()
	Block(w, "Findings (layer, status · what to do)", findingLines(s))
	Block(w, "Caveats", caveatLines(s, 0))
	Block(w, "Host preparation", prepLines(s))
	Block(w, "Time to vet", timeToVetLines(s))
	Block(w, "Detection power", detectionLines(s))
	Block(w, "Repeat within the run", repeatLines(s))
}

// findingLines are the run's failed, then flagged findings with their layer and action (what could
// not decide is in the caveats); a summary judged before findings existed shows its flags.
func findingLines(s *results.Summary) []string {
	if len(s.Findings) == 0 {
		return flagLines(s)
	}
	var out []string
	for _, st := range []results.Status{results.StatusFailed, results.StatusFlag} {
		for _, f := range s.Findings {
			if f.Status == st {
				if len(s.Hosts) == 1 {
					f.Host = "" // one host: its name says nothing
				}
				out = append(out, errorLine(f.Line())) // a model's error carries its engine's last log lines
			}
		}
	}
	return out
}

func flagLines(s *results.Summary) []string {
	var out []string
	add := func(fl []results.Flag) {
		for _, f := range fl {
			out = append(out, flagLine(f))
		}
	}
	add(s.Flags)
	for _, h := range s.Hosts {
		add(h.Flags)
		if h.Error != "" && !modelSaid(h) {
			out = append(out, fmt.Sprintf("[failed] %s: %s", hostName(h), errorLine(h.Error)))
		}
		if h.Health != nil {
			add(h.Health.Flags)
			for _, g := range h.Health.GPUs {
				add(g.Flags)
			}
		}
		for _, m := range h.Models {
			add(m.Flags)
			if m.Error != "" && m.Status != results.StatusInterrupted {
				out = append(out, fmt.Sprintf("[failed] %s: %s", m.Model, errorLine(m.Error)))
			}
			for _, e := range m.Endpoints {
				add(e.Flags)
				if e.Error != "" && e.Status != results.StatusInterrupted {
					out = append(out, fmt.Sprintf("[failed] %s on gpu %s: %s", m.Model, GPUList(e.GPUs), firstLine(e.Error)))
				}
			}
		}
	}
	return out
}

// flagLine is a flag as every block says it: "[check] subject: reason".
func flagLine(f results.Flag) string { return fmt.Sprintf("[%s] %s: %s", f.Check, f.Subject, f.Reason) }

// errorLine is an error on one line: its first, and where that one announces more ("…; last log
// lines:") its last, which is where a crashed process says why.
func errorLine(err string) string {
	first := firstLine(err)
	if !strings.HasSuffix(first, ":") {
		return first
	}
	rest := strings.Split(strings.TrimSpace(strings.TrimPrefix(err, first)), "\n")
	return first + " … " + strings.TrimSpace(rest[len(rest)-1])
}

// modelSaid reports whether one of the host's models already carries the host's error (a fleet
// host fails with its model's error), so the failures block says it once.
func modelSaid(h results.Host) bool {
	for _, m := range h.Models {
		if m.Error != "" && strings.Contains(h.Error, m.Error) {
			return true
		}
	}
	return false
}

func hostName(h results.Host) string {
	if h.Name == "" {
		return "host"
	}
	return "host " + h.Name
}

// caveatLines lists what the figures cannot say, one line per finding; a finding shared by several
// GPUs is one line naming them all (the first maxWho of them and how many more, when maxWho > 0).
func caveatLines(s *results.Summary, maxWho int) []string {
	var order []string
	found := map[string][]string{} // what -> the GPUs it is about
	add := func(gpu, what string) {
		if _, ok := found[what]; !ok {
			order = append(order, what)
		}
		if !slices.Contains(found[what], gpu) {
			found[what] = append(found[what], gpu)
		}
	}
	for _, h := range s.Hosts {
		on := "gpu " // in a fleet's summary a GPU is named with its host: "node1 gpu 0"
		if s.Fleet != nil {
			on = h.Name + " gpu "
		}
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				g := on + GPUList(e.GPUs)
				switch e.Status {
				case results.StatusInterrupted:
					add(g, m.Model+": INTERRUPTED: the run was stopped while it ran; its figures are partial")
				case results.StatusNotRun:
					add(g, m.Model+": NOT RUN: the run stopped before it")
				}
				if l := e.Load; l != nil {
					if l.Client.ClientLimited {
						add(g, ClientLimited+": the load generator fell behind its schedule, so it, not the server, set the pace: "+
							"breaches and GPU-to-GPU gaps of these figures are inconclusive, not flags (give gpuvet more CPU, fewer GPUs at once with --parallel-gpus, or fewer streams; the reason per rung is in summary.json)")
					}
					if l.Saturation.LowerBound() {
						add(g, LowerBound+": throughput is a lower bound: "+l.Saturation.Reason)
					}
				}
				for _, v := range e.Verdicts {
					if v.Result == "inconclusive" {
						add(g, v.Rule+": inconclusive: "+afterInconclusive(v.Reason))
					}
				}
			}
			for _, c := range m.Comparisons {
				if c.ClientLimited { // one line for the model, not one a cell
					add(on+"all", "GPU-to-GPU comparisons of "+m.Model+": "+ClientLimited+": "+judgeNote(c.Note))
					continue
				}
				if c.LowConfidence {
					add(on+"all", "GPU-to-GPU "+c.Metric+": "+c.Note)
				}
				for _, v := range c.Values {
					if v.Inconclusive && !c.LowConfidence {
						add(on+fmt.Sprint(v.GPU), "GPU-to-GPU "+c.Metric+": inconclusive: "+afterInconclusive(v.Reason))
					}
				}
			}
		}
	}
	var out []string
	for _, what := range order {
		gpus := found[what]
		who := Names(gpus, maxWho)
		if s.Fleet == nil && len(gpus) > 1 { // one host: "gpu 0, 1"
			who = "gpu " + strings.ReplaceAll(who, "gpu ", "")
		}
		who = strings.ReplaceAll(who, "gpu all", "all GPUs")
		out = append(out, who+": "+what)
	}
	for _, c := range s.SkippedChecks() {
		out = append(out, c+": not checked, so the run is partial, not a full pass")
	}
	return append(out, s.Caveats...)
}

// judgeNote is the last part of a comparison's note (the client-limited reason comes last).
func judgeNote(note string) string {
	if i := strings.LastIndex(note, "; "); i >= 0 {
		return note[i+2:]
	}
	return note
}

// afterInconclusive keeps the why of a reason ("… : inconclusive, <why>").
func afterInconclusive(r string) string {
	for _, sep := range []string{"inconclusive, not flagged: ", "inconclusive, "} {
		if _, why, ok := strings.Cut(r, sep); ok {
			return why
		}
	}
	return r
}

// GPUStatus is an endpoint row's status: its GPUs' judged verdict (a GPU that failed health never
// reads ok because it served well), else, unjudged, the endpoint's own.
func GPUStatus(h results.Host, e results.Endpoint) results.Status {
	if st := h.GPUStatus(e.GPUs); st != "" {
		return st
	}
	return e.Status
}

// note says what else stands behind a row: a health verdict that differs from the serving one, a
// client-limited load, a throughput that is only a lower bound.
func note(h results.Host, e results.Endpoint) string {
	var n []string
	serving := e.Status
	for _, g := range h.GPUs {
		if !slices.Contains(e.GPUs, g.Index) {
			continue
		}
		if g.Health != "" && g.Health != results.StatusOK && g.Health != results.StatusSkipped {
			n = append(n, fmt.Sprintf("health %s (gpu %d)", g.Health, g.Index))
		}
		serving = results.Worse(serving, g.Serving) // an undecided GPU-to-GPU comparison raises it
	}
	if st := GPUStatus(h, e); serving != st && serving != "" {
		n = append(n, endpointLayer(e)+" "+string(serving))
	}
	l := e.Load
	if l != nil && l.Client.ClientLimited {
		n = append(n, ClientLimited)
	}
	if l != nil && l.Saturation.LowerBound() {
		n = append(n, LowerBound)
	}
	return strings.Join(n, ", ")
}

// endpointLayer names the layer that set an endpoint's status apart from its GPU's: its first
// finding of a layer other than the GPU's and its links' ("serving" when none says).
func endpointLayer(e results.Endpoint) string {
	for _, f := range e.Flags {
		if f.Layer != "" && !results.GPULayer(f.Layer) {
			return f.Layer
		}
	}
	return "serving"
}

// GPUList writes GPU indexes as the tables do: 0,1 ("-" for none).
func GPUList(g []int) string {
	if len(g) == 0 {
		return "-"
	}
	p := make([]string, len(g))
	for i, x := range g {
		p[i] = fmt.Sprint(x)
	}
	return strings.Join(p, ",")
}

func syncMs(l *results.Load, pick func(results.Run) results.Dist) string {
	for _, r := range l.Runs {
		if r.Kind == "synchronous" {
			d := pick(r)
			if d.Count == 0 {
				return ""
			}
			return N(fmt.Sprintf("%.1f ms", d.P95), r.Requests.Successful)
		}
	}
	return ""
}

func peak(l *results.Load) string {
	if l.PeakOutputTokS == 0 {
		return ""
	}
	s := fmt.Sprintf("%.0f", l.PeakOutputTokS)
	if l.Saturation.LowerBound() {
		s = "≥ " + s
	}
	return s
}

// sol is the measured peak as % of the roofline bound at the profile's batch, and the bound; marked
// IMPOSSIBLE above 100 %, and BUSY or THROTTLED when the figure is not the GPU's own.
func sol(s *results.SpeedOfLight) string {
	if s == nil || s.BoundOutputTokS == 0 {
		return ""
	}
	out := fmt.Sprintf("%.1f%% of %.0f (b=%.0f, %s)", s.Percent, s.BoundOutputTokS, s.Batch, s.Limit)
	if s.Impossible {
		out += " IMPOSSIBLE"
	}
	if s.Marked != "" {
		kind, _, _ := strings.Cut(s.Marked, ":")
		out += " " + strings.ToUpper(kind)
	}
	return out
}

// figure is v in format, "" for 0 (not measured).
func figure(v float64, format string) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf(format, v)
}

func suite(f *results.Functional) string {
	if f == nil {
		return ""
	}
	n := 0
	for _, t := range f.Tests {
		if t.Passed {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(f.Tests))
}

// firstLine is the first line of s.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
