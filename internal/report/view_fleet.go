package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A fleet gets a node × GPU heat map and the nodes ranked worst first, so a thousand nodes read like
// ten. Only the worst fleetDetailHosts hosts are rendered in full; the others are one ranked line,
// their detail in hosts/NAME.json (WithDetails; `gpuvet report --host NAME` renders it).
const (
	fleetDetailHosts = 10 // more hosts than this: only the worst this many get their full section
	fleetOpenMin     = 10 // ranked rows shown open: every node that is not ok, at least this many…
	fleetOpenMax     = 50 // …and at most this many; the rest fold, one line each
	fleetReasons     = 3  // reasons printed per ranked node before "N more"
)

// fleetMapView is the fleet section: counts, the heat map per model, the ranked nodes.
type fleetMapView struct {
	Nodes, GPUs, Figure, RankedModel, RankedMedian string
	Counts                                         []kv // status -> count
	Bands                                          []kv // heat-map class -> label
	Maps                                           []heatMap
	Worst, Rest                                    []rankRow
	Detail                                         int  // hosts rendered in full below (0: every host is)
	DetailOmit                                     int  // hosts not rendered in full
	DetailFiles                                    bool // each host's one-host summary is hosts/NAME.json (Host.DetailFile)
}

type heatMap struct {
	Model, Median string
	Tiles         []heatTile
}

// heatTile is one node: its name (on hover) and one cell per GPU.
type heatTile struct {
	Name, Class string
	Cells       []cell
}

type rankRow struct {
	Rank                               int
	Name, Anchor, Status, GPUs, Figure string
	Delta, DeltaClass                  string
	Reasons                            []string
	More                               int
}

// heatBands are the colour steps of a GPU's figure against the fleet median (below it is worse).
var heatBands = []struct {
	below float64 // DeltaPct above this falls in the band
	class string
	label string
}{{-2, "hb0", "within 2 % of the median, or above it"}, {-5, "hb1", "2–5 % below"}, {-10, "hb2", "5–10 % below"}, {-20, "hb3", "10–20 % below"}, {-1e18, "hb4", "more than 20 % below"}}

// buildFleetMap is the fleet section of ranked v; shown are the hosts rendered in full below.
func buildFleetMap(s *results.Summary, v *fleetview.View, shown []results.Host) *fleetMapView {
	models := fleetview.Models(s)
	ranked := v.Model
	f := &fleetMapView{Nodes: fleetview.Thousands(strconv.Itoa(len(v.Nodes))), GPUs: fleetview.Thousands(strconv.Itoa(v.GPUs)), Figure: fleetview.FigureName, RankedModel: ranked}
	if v.Median > 0 {
		f.RankedMedian = num(v.Median)
	}
	for _, c := range v.Counts() {
		f.Counts = append(f.Counts, kv{string(c.Status), fleetview.Thousands(strconv.Itoa(c.N))})
	}
	for _, b := range heatBands {
		f.Bands = append(f.Bands, kv{b.class, b.label})
	}
	if len(models) == 0 {
		f.Maps = append(f.Maps, heatOf(v))
	}
	for _, m := range models {
		mv := v
		if m != v.Model {
			mv = fleetview.Build(s, m)
		}
		f.Maps = append(f.Maps, heatOf(mv))
	}
	open := v.Listed(fleetOpenMin, fleetOpenMax)
	detail := map[string]bool{}
	for _, h := range shown {
		detail[h.Name] = true
	}
	for i, n := range v.Nodes {
		r := rankRow{Rank: i + 1, Name: n.Name, Status: string(n.Status), GPUs: gpuCounts(n), Figure: "—"}
		if detail[n.Name] {
			r.Anchor = hostAnchor(n.Name)
		}
		if n.HasValue() {
			r.Figure = num(n.Value)
			r.Delta, r.DeltaClass = signedPct(n.DeltaPct), bandOf(n.DeltaPct)
		}
		r.Reasons = n.Reasons
		if i >= open && len(r.Reasons) > 1 { // one line each
			r.Reasons, r.More = r.Reasons[:1], len(r.Reasons)-1
		} else if len(r.Reasons) > fleetReasons {
			r.Reasons, r.More = r.Reasons[:fleetReasons], len(r.Reasons)-fleetReasons
		}
		if i < open {
			f.Worst = append(f.Worst, r)
		} else {
			f.Rest = append(f.Rest, r)
		}
	}
	if len(s.Hosts) > fleetDetailHosts {
		f.Detail, f.DetailOmit = len(detail), len(s.Hosts)-len(detail)
	}
	for _, h := range s.Hosts {
		f.DetailFiles = f.DetailFiles || h.DetailFile != ""
	}
	return f
}

// heatOf lays out one model's map: one tile per node, in name order (racks and numbering stay
// where an operator expects them; the ranked list gives the order of badness).
func heatOf(v *fleetview.View) heatMap {
	hm := heatMap{Model: v.Model}
	if v.Median > 0 {
		hm.Median = num(v.Median)
	}
	nodes := append([]fleetview.Node(nil), v.Nodes...)
	sortNatural(nodes)
	for _, n := range nodes {
		t := heatTile{Name: n.Name, Class: "s-" + statusClass(n.Status)}
		for _, g := range n.GPUs {
			t.Cells = append(t.Cells, heatCell(v, n, g))
		}
		if len(t.Cells) == 0 { // no GPU results at all: one cell says why
			why := string(n.Status)
			if len(n.Reasons) > 0 {
				why += ": " + n.Reasons[0]
			}
			t.Cells = append(t.Cells, cell{Class: "hw " + cellStatusClass(n.Status), Tip: n.Name + " · " + why})
		}
		hm.Tiles = append(hm.Tiles, t)
	}
	return hm
}

func heatCell(v *fleetview.View, n fleetview.Node, g fleetview.GPU) cell {
	tip := []string{n.Name + " " + g.Label, string(g.Status)}
	class := cellStatusClass(g.Status)
	if g.Value > 0 {
		fig := num(g.Value) + " " + fleetview.FigureUnit
		if g.LowerBound {
			fig = "≥ " + fig
		}
		if v.Median > 0 {
			fig += fmt.Sprintf(" (%s vs the fleet median %s)", signedPct(g.DeltaPct), num(v.Median))
		}
		tip = append(tip, fig)
		if class == "" || class == "hc-inc" {
			class = strings.TrimSpace(bandOf(g.DeltaPct) + " " + class)
		}
	} else if class == "" || class == "hc-inc" {
		class = strings.TrimSpace("hc-none " + class)
	}
	if g.ITLP95 > 0 {
		tip = append(tip, "sync ITL p95 "+num(g.ITLP95)+" ms")
	}
	if g.Reason != "" {
		tip = append(tip, g.Reason)
	} else if n.Status != results.StatusOK && len(n.Reasons) > 0 {
		tip = append(tip, "node: "+n.Reasons[0])
	}
	return cell{Class: class, Tip: strings.Join(tip, " · ")}
}

// cellStatusClass colours a cell by its status when the status says more than the figure: failed,
// flagged, not vetted. ok cells are coloured by their figure; inconclusive ones too, marked.
func cellStatusClass(st results.Status) string {
	if c, ok := cellClasses[st]; ok {
		return c
	}
	return "hc-skipped"
}

var cellClasses = map[results.Status]string{results.StatusOK: "", "": "", results.StatusInconclusive: "hc-inc", results.StatusFlag: "hc-flag",
	results.StatusFailed: "hc-failed", results.StatusInterrupted: "hc-failed", results.StatusIncomplete: "hc-failed"}

func bandOf(delta float64) string {
	for _, b := range heatBands {
		if delta > b.below {
			return b.class
		}
	}
	return heatBands[len(heatBands)-1].class
}

// gpuCounts is a node's GPUs by status: "8 ok", "7 ok · 1 flag" ("—" with none).
func gpuCounts(n fleetview.Node) string { return orDash(strings.Join(n.GPUCounts(), " · ")) }

// hostAnchor is the id of a host's section.
func hostAnchor(name string) string { return "host-" + name }

// sortNatural orders nodes by name with digit runs compared as numbers (node-2 before node-10).
func sortNatural(nodes []fleetview.Node) {
	sort.SliceStable(nodes, func(i, j int) bool { return naturalLess(nodes[i].Name, nodes[j].Name) })
}

func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// isFleet reports whether s gets the fleet section: two nodes or more (hosts, and hosts skipped).
func isFleet(s *results.Summary) bool {
	n := len(s.Hosts)
	if s.Fleet != nil {
		n += len(s.Fleet.Skipped)
	}
	return n > 1
}

// shownHosts are the hosts whose full section is rendered: every host of a fleet up to
// fleetDetailHosts, in the summary's order; of a larger one the worst fleetDetailHosts of ranked v,
// worst first.
func shownHosts(s *results.Summary, v *fleetview.View) []results.Host {
	if len(s.Hosts) <= fleetDetailHosts {
		return s.Hosts
	}
	by := map[string]int{}
	for i, h := range s.Hosts {
		by[h.Name] = i
	}
	var out []results.Host
	for _, n := range v.Nodes {
		if i, ok := by[n.Name]; ok && len(out) < fleetDetailHosts {
			out = append(out, s.Hosts[i])
		}
	}
	return out
}
