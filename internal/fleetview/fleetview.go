// Package fleetview arranges a many-host summary for reading: every node ranked worst first (failed,
// not vetted, flagged, inconclusive, then by how far its figure sits below the fleet median), each
// with its reasons, and one cell per GPU with its status and its figure against the fleet median.
// The HTML report (heat map, ranked list) and the terminal (the compact fleet block) both print it,
// so the order and the median are decided once, here. It reads results only.
package fleetview

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Figure is the per-GPU figure a view colours and ranks by: the peak output tok/s of the sweep
// (higher is better), the figure node-to-node and GPU-to-GPU comparisons weigh first.
const (
	FigureName = "peak output tok/s"
	FigureUnit = "tok/s"
)

// GPU is one GPU (or tp group) of a node, for one model.
type GPU struct {
	Label  string         // "gpu 3", "gpus 0,1"
	Status results.Status // the GPU's judged verdict (or, in a summary without one, the endpoint's or its health status)
	Value  float64        // the figure; 0: none
	// DeltaPct is Value against the fleet median, in % (negative: below it); meaningless without Value.
	DeltaPct   float64
	LowerBound bool    // the figure is a lower bound (truncated or unsaturated sweep)
	ITLP95     float64 // sync ITL p95 in ms; 0: not measured
	Reason     string  // the first flag reason or error of this GPU ("" when none)
}

// Node is one host of the fleet (or one host the backend skipped).
type Node struct {
	Name   string
	Status results.Status // the host's; skipped for a host the backend did not run
	GPUs   []GPU
	// Value is the median of the node's GPU figures (0: none), DeltaPct it against the fleet median.
	Value    float64
	DeltaPct float64
	// Reasons are why the node ranks where it does, most telling first: its error, its skip reason,
	// its node-to-node flags, then each GPU's flags and errors, then what left it inconclusive.
	Reasons []string
}

// HasValue reports whether the node has a figure to compare.
func (n Node) HasValue() bool { return n.Value > 0 }

// View is a fleet's nodes for one model.
type View struct {
	Model  string  // the model whose figure colours and ranks ("" when no model was served)
	Median float64 // the fleet median of the per-GPU figure (0: none)
	Nodes  []Node  // ranked worst first
	GPUs   int     // GPU cells in all
}

// Count is how many nodes have one status.
type Count struct {
	Status results.Status
	N      int
}

// Counts are the nodes by status, worst first, statuses with no node left out.
func (v *View) Counts() []Count {
	n := map[results.Status]int{}
	for _, x := range v.Nodes {
		n[x.Status]++
	}
	var out []Count
	for st, c := range n {
		out = append(out, Count{st, c})
	}
	slices.SortFunc(out, func(a, b Count) int { // a status this package does not know yet last, by name
		return cmp.Or(cmp.Compare(statusRank(a.Status), statusRank(b.Status)), strings.Compare(string(a.Status), string(b.Status)))
	})
	return out
}

// Listed is how many of the ranked nodes a short list shows: every node that is not ok, but at
// least least and at most most (and never more than there are).
func (v *View) Listed(least, most int) int {
	n := 0
	for _, x := range v.Nodes {
		if x.Status != results.StatusOK {
			n++
		}
	}
	return min(len(v.Nodes), max(least, min(n, most)))
}

// order is the ranking of node statuses, worst first. A node not vetted (skipped, never ready, not
// run) ranks right after a failed one: it is not known to be good, and it is not a flag on a card.
var order = []results.Status{results.StatusFailed, results.StatusInterrupted, results.StatusIncomplete,
	results.StatusSkipped, results.StatusNotRun, results.StatusFlag, results.StatusInconclusive, results.StatusOK, ""}

func statusRank(s results.Status) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// Models are the models served anywhere in the fleet, in first-seen order.
func Models(s *results.Summary) []string {
	var out []string
	for _, m := range s.Meta.Models {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			if !slices.Contains(out, m.Model) {
				out = append(out, m.Model)
			}
		}
	}
	return out
}

// Ranked ranks the fleet's nodes by the first model's figure (or, with none, by status alone).
func Ranked(s *results.Summary) *View {
	if ms := Models(s); len(ms) > 0 {
		return Build(s, ms[0])
	}
	return Build(s, "")
}

// Build ranks the fleet's nodes by model's figure ("" or an unknown model: by status alone, with
// each GPU's health status as its cell).
func Build(s *results.Summary, model string) *View {
	v := &View{Model: model}
	var all []float64
	for _, h := range s.Hosts {
		n := node(h, model)
		for _, g := range n.GPUs {
			if g.Value > 0 {
				all = append(all, g.Value)
			}
		}
		v.Nodes = append(v.Nodes, n)
	}
	if s.Fleet != nil {
		for _, sk := range s.Fleet.Skipped {
			v.Nodes = append(v.Nodes, Node{Name: sk.Name, Status: results.StatusSkipped, Reasons: []string{"skipped: " + sk.Reason}})
		}
	}
	v.Median = median(all)
	for i := range v.Nodes {
		n := &v.Nodes[i]
		var vals []float64
		for j := range n.GPUs {
			g := &n.GPUs[j]
			if g.Value > 0 && v.Median > 0 {
				g.DeltaPct = (g.Value/v.Median - 1) * 100
				vals = append(vals, g.Value)
			}
		}
		if n.Value = median(vals); n.Value > 0 && v.Median > 0 {
			n.DeltaPct = (n.Value/v.Median - 1) * 100
		}
		v.GPUs += len(n.GPUs)
	}
	sort.SliceStable(v.Nodes, func(i, j int) bool { return worse(v.Nodes[i], v.Nodes[j]) })
	return v
}

// worse orders two nodes: by status, then the further below the median first (a node with no
// figure before one with), then by name.
func worse(a, b Node) bool {
	if ra, rb := statusRank(a.Status), statusRank(b.Status); ra != rb {
		return ra < rb
	}
	if a.HasValue() != b.HasValue() {
		return !a.HasValue()
	}
	if a.DeltaPct != b.DeltaPct {
		return a.DeltaPct < b.DeltaPct
	}
	return a.Name < b.Name
}

// node reads one host: its GPU cells for model and its reasons.
func node(h results.Host, model string) Node {
	n := Node{Name: h.Name, Status: h.Status}
	if n.Status == "" {
		n.Status = results.StatusOK
	}
	r := &reasons{}
	r.add("", firstLine(h.Error))
	r.add("", prefixed("discovery: ", firstLine(h.Discovery.Error)))
	r.flags("", h.Flags)
	if i := slices.IndexFunc(h.Models, func(m results.Model) bool { return m.Model == model }); i >= 0 && len(h.Models[i].Endpoints) > 0 {
		for _, e := range h.Models[i].Endpoints {
			n.GPUs = append(n.GPUs, endpointCell(h, e))
		}
	} else {
		n.GPUs = healthGPUs(h)
	}
	if h.Health != nil {
		r.add("", prefixed("health: ", firstLine(h.Health.Error)))
		for _, g := range h.Health.GPUs {
			r.flags(fmt.Sprint(g.GPU.Index), g.Flags)
		}
		r.flags("", h.Health.Flags)
	}
	for _, hm := range h.Models {
		r.add("", prefixed(hm.Model+": ", firstLine(hm.Error)))
		r.flags("", hm.Flags)
		for _, e := range hm.Endpoints {
			r.flags(gpuIDs(e.GPUs), e.Flags)
			r.add(gpuIDs(e.GPUs), firstLine(e.Error))
		}
	}
	if n.Status == results.StatusInconclusive {
		for _, hm := range h.Models {
			for _, e := range hm.Endpoints {
				for _, vd := range e.Verdicts {
					if vd.Result == "inconclusive" {
						r.add(gpuIDs(e.GPUs), vd.Rule+": inconclusive")
					}
				}
			}
		}
	}
	n.Reasons = r.lines()
	return n
}

func endpointCell(h results.Host, e results.Endpoint) GPU {
	g := GPU{Label: GPULabel(e.GPUs), Status: e.Status}
	if st := h.GPUStatus(e.GPUs); st != "" {
		g.Status = st // the GPU's judged verdict: health and serving
	}
	if g.Status == "" {
		g.Status = results.StatusOK
	}
	if l := e.Load; l != nil {
		g.Value, g.LowerBound = l.PeakOutputTokS, l.Saturation.LowerBound()
		for _, r := range l.Runs {
			if r.Kind == "synchronous" && r.ITL.Count > 0 {
				g.ITLP95 = r.ITL.P95
				break
			}
		}
	}
	if len(e.Flags) > 0 {
		g.Reason = e.Flags[0].Reason
	} else if e.Error != "" {
		g.Reason = firstLine(e.Error)
	}
	return g
}

// healthGPUs are a host's GPUs when no endpoint served the model: each GPU's judged verdict (its
// health status in a summary without one: the health phase's own status also counts findings of
// other layers, which leave the GPU undecided, not flagged), no figure.
func healthGPUs(h results.Host) []GPU {
	var out []GPU
	if h.Health != nil {
		for _, g := range h.Health.GPUs {
			c := GPU{Label: fmt.Sprintf("gpu %d", g.GPU.Index), Status: cmp.Or(h.GPUStatus([]int{g.GPU.Index}), g.Status)}
			if len(g.Flags) > 0 {
				c.Reason = g.Flags[0].Reason
			}
			out = append(out, c)
		}
		return out
	}
	for _, g := range h.Discovery.GPUs {
		st := h.Status
		if st == "" {
			st = results.StatusSkipped
		}
		out = append(out, GPU{Label: fmt.Sprintf("gpu %d", g.Index), Status: st})
	}
	return out
}

// reasons is an ordered set of one-line reasons. A reason several GPUs share is one line naming
// them all ("gpus 0,1,2: …"), and a GPU's reason that a node-level one already says is left out (a
// failed node's error quotes its endpoints').
type reasons struct {
	text []string   // in first-seen order
	gpus [][]string // the GPUs of each ("" entries: the node's own)
}

func (r *reasons) add(gpu, s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if gpu != "" {
		for i, t := range r.text {
			if len(r.gpus[i]) == 0 && strings.Contains(t, s) {
				return
			}
		}
	}
	i := slices.Index(r.text, s)
	if i < 0 {
		r.text, r.gpus = append(r.text, s), append(r.gpus, nil)
		i = len(r.text) - 1
	}
	if gpu != "" && !slices.Contains(r.gpus[i], gpu) {
		r.gpus[i] = append(r.gpus[i], gpu)
	}
}

// flags adds the reasons of fs.
func (r *reasons) flags(gpu string, fs []results.Flag) {
	for _, f := range fs {
		r.add(gpu, f.Reason)
	}
}

func (r *reasons) lines() []string {
	out := make([]string, len(r.text))
	for i, t := range r.text {
		switch g := r.gpus[i]; len(g) {
		case 0:
			out[i] = t
		case 1:
			out[i] = "gpu " + g[0] + ": " + t
		default:
			out[i] = "gpus " + strings.Join(g, ",") + ": " + t
		}
	}
	return out
}

func prefixed(p, s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return p + s
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// gpuIDs is an endpoint's GPU indexes as one id: "3", "0+1" for a tp group.
func gpuIDs(gpus []int) string {
	p := make([]string, len(gpus))
	for i, g := range gpus {
		p[i] = fmt.Sprint(g)
	}
	return strings.Join(p, "+")
}

// GPULabel names an endpoint's GPUs as every surface does: "gpu 3", "gpus 0,1".
func GPULabel(gpus []int) string {
	if len(gpus) == 1 {
		return fmt.Sprintf("gpu %d", gpus[0])
	}
	return "gpus " + strings.ReplaceAll(gpuIDs(gpus), "+", ",")
}

// median is the median of v (0 when empty).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Spread is the lowest and highest DeltaPct of the nodes with a figure among nodes (0, 0 when none).
func Spread(nodes []Node) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, n := range nodes {
		if n.HasValue() {
			lo, hi = math.Min(lo, n.DeltaPct), math.Max(hi, n.DeltaPct)
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 0
	}
	return lo, hi
}

// ByHost groups lines "HOST: what" (HOST one of s's hosts) by what: the whats in first-seen order,
// and the hosts of each (none for a line about no host), for the report and terminal to name.
func ByHost(s *results.Summary, lines []string) (whats []string, hosts map[string][]string) {
	known := map[string]bool{}
	for _, h := range s.Hosts {
		known[h.Name] = true
	}
	hosts = map[string][]string{}
	for _, c := range lines {
		host, what, ok := strings.Cut(c, ": ")
		if !ok || !known[host] {
			host, what = "", c
		}
		if _, seen := hosts[what]; !seen {
			whats = append(whats, what)
			hosts[what] = nil
		}
		if host != "" {
			hosts[what] = append(hosts[what], host)
		}
	}
	return whats, hosts
}

// Seconds writes a wall time for people, the same on every surface: "0.4 s", "12 s", "4m58s"
// (rounded: 75.7 s is 1m16s).
func Seconds(s float64) string {
	switch { // by the rounded value: 9.96 s is "10 s", 59.7 s "1m0s"
	case math.Round(s*10) < 100:
		return fmt.Sprintf("%.1f s", s)
	case math.Round(s) < 60:
		return fmt.Sprintf("%.0f s", s)
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

// PhaseSeconds is a phase's wall time and how it was scheduled: "12 s (4 GPUs at once)".
func PhaseSeconds(p results.PhaseTime) string {
	if p.Schedule == "" {
		return Seconds(p.Seconds)
	}
	return Seconds(p.Seconds) + " (" + p.Schedule + ")"
}

// EngineSeconds is an engine's wall time and its parts.
func EngineSeconds(t *results.EndpointTiming) string {
	return fmt.Sprintf("%s (serve %s, warm-up %s, load %s, API suite %s)", Seconds(t.TotalSeconds), Seconds(t.ServeSeconds),
		Seconds(t.WarmupSeconds), Seconds(t.LoadSeconds), Seconds(t.FunctionalSeconds))
}

// LinkSpeed is the speed of a GPU's first NVLink that is up ("—" when none reports one).
func LinkSpeed(gl results.GPULinks) string {
	for _, l := range gl.Links {
		if l.Up && l.GBps > 0 {
			return fmt.Sprintf("%.3f GB/s", l.GBps)
		}
	}
	return "—"
}

// Thousands writes an integer's digits with thousands separators: "7992" -> "7,992".
func Thousands(digits string) string {
	digits, neg := strings.CutPrefix(digits, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// GPUCounts is the node's GPUs by status, in the order the statuses first appear: "7 ok", "1 flag".
// The terminal and the report join them each in their own way.
func (n Node) GPUCounts() []string {
	count := map[results.Status]int{}
	var order []results.Status
	for _, g := range n.GPUs {
		if count[g.Status] == 0 {
			order = append(order, g.Status)
		}
		count[g.Status]++
	}
	parts := make([]string, len(order))
	for i, st := range order {
		parts[i] = fmt.Sprintf("%d %s", count[st], st)
	}
	return parts
}
