package report

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleetview/synth"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// simFleet is a judged synthetic fleet of nodes × 8 GPUs made from a real `gpuvet run --sim
// --sim-gpus 8` summary (testdata/sim8-summary.json): node 7 15 % slower, node 13's load Jobs
// failed, node 21 never ready (when the fleet has that many nodes).
func simFleet(t testing.TB, nodes int) *results.Summary {
	t.Helper()
	src, err := results.Read(filepath.Join("testdata", "sim8-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	o := synth.Defaults()
	o.Nodes = nodes
	s, err := synth.Fleet(src, o)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := config.Load(config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := judge.Fleet(s, plan); err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	rankedRow  = regexp.MustCompile(`<tr><td class="r">(\d+)</td><td>(?:<a href="[^"]*">)?([^<]+)(?:</a>)?</td><td><span class="pill s-([a-z_]+)">`)
	heatCellRe = regexp.MustCompile(`<i class="(h[a-z0-9 -]+)" title="([^"]*)"></i>`)
)

// Issue 31: a fleet's report has a node × GPU heat map (a cell per GPU with its node, GPU, figure,
// status and reason on hover) and the nodes ranked worst first: the failed node, the one never
// ready, the straggler, then the rest by distance below the median; only the worst hosts in full.
func TestHTMLFleetHeatMapAndRanking(t *testing.T) {
	s := simFleet(t, 40)
	out := render(t, s)
	if !strings.Contains(out, `id="fleet-map"`) || !strings.Contains(out, "Fleet: 40 nodes, 312 GPUs") {
		t.Fatalf("no fleet section with its counts")
	}
	cells := heatCellRe.FindAllStringSubmatch(out, -1)
	if len(cells) != 313 { // 39 nodes × 8 GPUs, and one cell for the node that never became ready
		t.Fatalf("%d heat-map cells, want 313 (one per GPU, one for the skipped node)", len(cells))
	}
	var straggler, failed, skipped int
	for _, c := range cells {
		tip := template_unescape(c[2])
		switch {
		case strings.HasPrefix(tip, synth.NodeName(7)+" gpu "):
			straggler++
			if (c[1] != "hb3" && c[1] != "hb4") || !regexp.MustCompile(`tok/s \(-[12]\d\.\d % vs the fleet median [\d,]+\) · sync ITL p95 [\d.]+ ms`).MatchString(tip) {
				t.Errorf("straggler's cell: class %q, title %q", c[1], tip)
			}
		case strings.HasPrefix(tip, synth.NodeName(13)+" gpu "):
			// Its load Job broke (the infrastructure's, not the GPUs'): its GPUs are not proven,
			// inconclusive, and the cell says why; the node and the run are failed.
			failed++
			if !strings.Contains(c[1], "hc-inc") || !strings.Contains(tip, "inconclusive · load job against engine pod") {
				t.Errorf("failed node's cell: class %q, title %q", c[1], tip)
			}
		case strings.HasPrefix(tip, synth.NodeName(21)):
			skipped++
			if !strings.Contains(c[1], "hc-skipped") || !strings.Contains(tip, "never became Ready") {
				t.Errorf("never-ready node's cell: class %q, title %q", c[1], tip)
			}
		default:
			// The source node's own GPUs spread by up to ~7 % (a busy client): healthy cells sit in the
			// first three bands, never in the straggler's.
			if (c[1] != "hb0" && c[1] != "hb1" && c[1] != "hb2") || !strings.Contains(tip, " · ok · ") {
				t.Errorf("healthy cell: class %q, title %q", c[1], tip)
			}
		}
	}
	if straggler != 8 || failed != 8 || skipped != 1 {
		t.Errorf("cells: %d straggler, %d failed, %d never ready; want 8, 8, 1", straggler, failed, skipped)
	}
	rows := rankedRow.FindAllStringSubmatch(out[strings.Index(out, `id="fleet-map"`):], -1)
	if len(rows) != 40 {
		t.Fatalf("%d ranked rows, want 40", len(rows))
	}
	want := [][2]string{{synth.NodeName(13), "failed"}, {synth.NodeName(21), "skipped"}, {synth.NodeName(7), "flag"}}
	for i, w := range want {
		if rows[i][2] != w[0] || rows[i][3] != w[1] {
			t.Errorf("rank %d: %s %s, want %s %s", i+1, rows[i][2], rows[i][3], w[0], w[1])
		}
	}
	for _, r := range rows[3:] {
		if r[3] != "ok" {
			t.Errorf("rank %s: %s is %s: only the three planted nodes may be other than ok", r[1], r[2], r[3])
		}
	}
	for _, w := range []string{"never became Ready", "BackoffLimitExceeded", "below the median of the other nodes",
		synth.NodeName(13) + ": Qwen/Qwen3-8B on gpu 0: load job"} { // a fleet's errors name their host
		if !strings.Contains(out, template_escape(w)) {
			t.Errorf("the ranked list lacks the reason %q", w)
		}
	}
	// 40 hosts: the 10 worst in full, worst first; the others only in the ranked list.
	sections := regexp.MustCompile(`<section class="host" id="host-([^"]+)">`).FindAllStringSubmatch(out, -1)
	if len(sections) != fleetDetailHosts || sections[0][1] != synth.NodeName(13) || sections[1][1] != synth.NodeName(7) {
		t.Errorf("%d host sections (first %v), want %d starting with the failed node, then the straggler", len(sections), sections[:min(2, len(sections))], fleetDetailHosts)
	}
	if !strings.Contains(out, "gpuvet report --host NAME") {
		t.Error("the report does not say how to see the other hosts in full")
	}
}

// A small fleet keeps every host in full, in the summary's order, and its node-to-node table has one
// column per host.
func TestHTMLSmallFleetKeepsEveryHost(t *testing.T) {
	s := simFleet(t, 3)
	out := render(t, s)
	sections := regexp.MustCompile(`<section class="host" id="host-([^"]+)">`).FindAllStringSubmatch(out, -1)
	if len(sections) != 3 || sections[0][1] != synth.NodeName(0) || sections[2][1] != synth.NodeName(2) {
		t.Fatalf("host sections %v", sections)
	}
	fleet := out[strings.Index(out, `<section id="fleet" class="host">`):]
	head := fleet[:strings.Index(fleet, "</tr>")]
	for i := range 3 {
		if !strings.Contains(head, "<th>"+synth.NodeName(i)+"</th>") {
			t.Errorf("node-to-node table lacks a column for %s: %s", synth.NodeName(i), head)
		}
	}
}

// One host: no fleet section.
func TestHTMLOneHostHasNoFleetSection(t *testing.T) {
	for _, s := range []*results.Summary{readSample(t), readSim(t)} {
		if out := render(t, s); strings.Contains(out, `id="fleet-map"`) {
			t.Error("a single-host report got a fleet section")
		}
	}
}

// `gpuvet report --host`: one node of a fleet, in full.
func TestHostsOnly(t *testing.T) {
	s := simFleet(t, 40)
	one, err := HostsOnly(s, []string{synth.NodeName(30)})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Hosts) != 1 || one.Status != results.StatusOK || len(one.Fleet.Skipped) != 0 {
		t.Fatalf("%d hosts, status %s, %d skipped", len(one.Hosts), one.Status, len(one.Fleet.Skipped))
	}
	out := render(t, one)
	if strings.Contains(out, `id="fleet-map"`) || !strings.Contains(out, `id="host-`+synth.NodeName(30)+`"`) {
		t.Error("the one-host report is not that host's, in full")
	}
	if _, err := HostsOnly(s, []string{"gpu-node-003"}); err == nil || !strings.Contains(err.Error(), "closest: gpu-node-0030") {
		t.Errorf("an unknown host: %v", err)
	}

	// What is about another host goes; what is about this one or the run stays.
	me, peer := synth.NodeName(30), synth.NodeName(7)
	s.Findings = []results.Finding{{Host: me, Check: "mine"}, {Host: peer, Check: "peer's"}, {Check: "the run's"}}
	s.Fleet.NodeActions = []results.NodeAction{{Node: peer}, {Node: me}}
	s.History = &results.History{Notes: []string{"node " + peer + ": no earlier run", "node " + me + ": no earlier run", "the store is new"},
		Trend: []results.TrendPoint{{Host: peer}, {Host: me}}, Drift: []results.Drift{{Host: peer}}, Acceptance: []results.Acceptance{{Host: me}}}
	s.Caveats = []string{peer + ": slow", "node " + peer + ": late", "run-wide"}
	if one, err = HostsOnly(s, []string{me}); err != nil {
		t.Fatal(err)
	}
	h := one.History
	if len(one.Findings) != 2 || one.Findings[0].Check != "mine" || one.Findings[1].Check != "the run's" ||
		len(one.Fleet.NodeActions) != 1 || one.Fleet.NodeActions[0].Node != me ||
		len(h.Notes) != 2 || strings.Contains(strings.Join(h.Notes, "|"), peer) || len(h.Trend) != 1 || h.Trend[0].Host != me ||
		len(h.Drift) != 0 || len(h.Acceptance) != 1 || len(one.Caveats) != 1 || one.Caveats[0] != "run-wide" {
		t.Errorf("narrowed to %s: findings %+v, actions %+v, history %+v, caveats %q", me, one.Findings, one.Fleet.NodeActions, h, one.Caveats)
	}
	if len(s.Findings) != 3 || len(s.Fleet.NodeActions) != 2 || len(s.History.Notes) != 3 || len(s.Caveats) != 3 {
		t.Error("HostsOnly changed the summary it narrowed")
	}
}

func template_unescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&#43;", "+").Replace(s)
}

// A narrowed summary's layers and action are its hosts' (and the run's own findings'), not the
// fleet's: every hosts/NAME.json of a large fleet is one host's HostsOnly, and a healthy node's
// file said "action: drain-rma, gpu failed" when another node was to be returned.
func TestHostsOnlyLayersAndActionAreItsHosts(t *testing.T) {
	s := simFleet(t, 6)
	bad, me := synth.NodeName(2), synth.NodeName(4)
	for i := range s.Hosts {
		if s.Hosts[i].Name == bad {
			s.Hosts[i].Status, s.Hosts[i].Action = results.StatusFailed, results.ActionDrainRMA
			s.Hosts[i].Layers = map[string]results.Status{results.LayerGPU: results.StatusFailed}
		}
	}
	s.Status, s.Action = results.StatusFailed, results.ActionDrainRMA
	s.Findings = []results.Finding{{Host: bad, Layer: results.LayerGPU, Status: results.StatusFailed, Check: "health.xid", Action: results.ActionDrainRMA},
		{Layer: results.LayerClient, Status: results.StatusInconclusive, Check: "run-wide", Action: results.ActionRerun}}
	s.Layers = map[string]results.Status{results.LayerGPU: results.StatusFailed, results.LayerClient: results.StatusInconclusive}
	one, err := HostsOnly(s, []string{me})
	if err != nil {
		t.Fatal(err)
	}
	if one.Action != "" || len(one.Layers) != 1 || one.Layers[results.LayerClient] != results.StatusInconclusive {
		t.Errorf("%s alone: action %q, layers %v; want no action and only the run's client layer", me, one.Action, one.Layers)
	}
	two, _ := HostsOnly(s, []string{me, bad})
	if two.Action != results.ActionDrainRMA || two.Layers[results.LayerGPU] != results.StatusFailed {
		t.Errorf("with %s: action %q, layers %v", bad, two.Action, two.Layers)
	}
	for i := range s.Hosts { // a fleet digest's hosts hold no action of their own: the findings say it
		s.Hosts[i].Action = ""
	}
	if two, _ = HostsOnly(s, []string{me, bad}); two.Action != results.ActionDrainRMA {
		t.Errorf("digest with %s: action %q", bad, two.Action)
	}
	if s.Action != results.ActionDrainRMA || len(s.Layers) != 2 {
		t.Error("HostsOnly changed the summary it narrowed")
	}
}
