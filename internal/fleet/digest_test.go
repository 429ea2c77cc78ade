package fleet

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/fleetview/synth"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
)

// judgedFleet is a synthetic fleet of n nodes × 8 GPUs made from a real 8-GPU --sim summary, judged
// as a fleet run judges it; o changes the synthetic options (nil: the defaults).
func judgedFleet(t *testing.T, n int, o func(*synth.Options)) (*results.Summary, *config.Plan) {
	t.Helper()
	src, err := results.Read("../report/testdata/sim8-summary.json")
	if err != nil {
		t.Fatal(err)
	}
	opt := synth.Defaults()
	opt.Nodes = n
	if o != nil {
		o(&opt)
	}
	s, err := synth.Fleet(src, opt)
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
	return s, plan
}

// Issue 31: summary.json of a large fleet holds what its readers read, and nothing a reader of the
// digest lacks: the heat map and ranked nodes read back from it are those of the full results, so
// are the figures judge compares, and it stays under 10 KB a node of 8 GPUs (18 KB before: the
// zero-valued fields, every distribution in full, the speed of light, unrounded figures).
func TestDigestKeepsWhatReadersRead(t *testing.T) {
	s, _ := judgedFleet(t, 40, nil)
	dir := t.TempDir()
	if _, err := WriteSummary(dir, s, os.Stderr); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "summary.json")
	back, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Hosts[1].DetailFile == "" {
		t.Fatal("no digest: the hosts have no detail file")
	}
	model := fleetview.Models(s)[0]
	full, dig := fleetview.Build(s, model), fleetview.Build(back, model)
	if len(full.Nodes) != len(dig.Nodes) || full.Median == 0 {
		t.Fatalf("%d nodes in the digest's view, %d in the full one's (median %g)", len(dig.Nodes), len(full.Nodes), full.Median)
	}
	byName := map[string]fleetview.Node{}
	for _, n := range full.Nodes {
		byName[n.Name] = n
	}
	for i := range full.Nodes {
		// The same order, but for nodes whose figures only rounding tells apart.
		if f, d := full.Nodes[i], dig.Nodes[i]; f.Status != d.Status || !near(f.Value, d.Value) {
			t.Fatalf("rank %d: digest %s %s %g, full %s %s %g", i+1, d.Name, d.Status, d.Value, f.Name, f.Status, f.Value)
		}
		d := dig.Nodes[i]
		f := byName[d.Name]
		if f.Name != d.Name || f.Status != d.Status || !reflect.DeepEqual(f.Reasons, d.Reasons) || !near(f.Value, d.Value) || len(f.GPUs) != len(d.GPUs) {
			t.Fatalf("rank %d: digest %s %s %g %q, full %s %s %g %q", i+1, d.Name, d.Status, d.Value, d.Reasons, f.Name, f.Status, f.Value, f.Reasons)
		}
		for j := range f.GPUs {
			fg, dg := f.GPUs[j], d.GPUs[j]
			if fg.Label != dg.Label || fg.Status != dg.Status || fg.Reason != dg.Reason || fg.LowerBound != dg.LowerBound || !near(fg.Value, dg.Value) || !near(fg.ITLP95, dg.ITLP95) {
				t.Fatalf("%s %s: digest %+v, full %+v", f.Name, fg.Label, dg, fg)
			}
		}
	}
	// The figures judge compares (node to node, against a baseline) read the same, but for the
	// throughput figures' intervals and rungs, which baseline.json keeps (below).
	for hi, h := range s.Hosts {
		for ei, e := range h.Models[0].Endpoints {
			de := back.Hosts[hi].Models[0].Endpoints[ei]
			if e.Load == nil {
				continue
			}
			for _, met := range judge.LLMMetrics {
				if strings.Contains(met.Name, "tok_s") || strings.Contains(met.Name, "req_s") {
					continue
				}
				f, ok := met.Get(e.Load)
				df, dok := met.Get(de.Load)
				if ok != dok || !near(f.Value, df.Value) || f.Samples != df.Samples || f.ClientLimited != df.ClientLimited || f.LowerBound != df.LowerBound {
					t.Fatalf("%s gpu %v %s: digest %+v (%v), full %+v (%v)", h.Name, e.GPUs, met.Name, df, dok, f, ok)
				}
			}
		}
	}
	if back.Status != s.Status || !reflect.DeepEqual(back.Flags, s.Flags) || len(back.Fleet.Comparisons) != len(s.Fleet.Comparisons) {
		t.Errorf("the run's verdict or its node-to-node comparisons differ in the digest")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(st.Size()) / 40; per > 10e3 {
		t.Errorf("summary.json: %.1f KB a node of 8 GPUs, want under 10 KB", per/1e3)
	}
}

// Issue 31: a large fleet's baseline.json is compared against host by host and GPU by GPU, and a
// node that became 20 % slower since is a breach. The summary's digest carries no interval, so a
// baseline of it could only ever say low_confidence; baseline.json keeps the intervals and rungs
// each compared figure weighs.
func TestFleetBaselineFindsASlowerNode(t *testing.T) {
	then, _ := judgedFleet(t, 12, func(o *synth.Options) { o.Straggler, o.Failed, o.NeverReady = -1, -1, -1 })
	dir := t.TempDir()
	if _, err := WriteSummary(dir, then, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if err := WriteBaseline(dir, then); err != nil {
		t.Fatal(err)
	}
	now, plan := judgedFleet(t, 12, func(o *synth.Options) { o.Straggler, o.Slowdown, o.Failed, o.NeverReady = 5, 0.2, -1, -1 })
	plan.Config.Run.Baseline = filepath.Join(dir, "baseline.json")
	if err := pipeline.BaselineFromFile(now, plan.Config.Run.Baseline, plan); err != nil {
		t.Fatal(err)
	}
	if now.Baseline == nil || len(now.Baseline.Rows) == 0 {
		t.Fatalf("no baseline comparison: %+v", now.Baseline)
	}
	breach := map[string]bool{}
	for _, r := range now.Baseline.Rows {
		for _, st := range r.Status {
			if host, _, _ := strings.Cut(r.Subject, ": "); st == judge.BaselineBreach {
				breach[host] = true
			}
		}
	}
	if !breach[synth.NodeName(5)] || len(breach) != 1 {
		t.Errorf("breaches on %v, want %s alone", breach, synth.NodeName(5))
	}
}

// near says two figures are the same but for the digest's rounding (6 significant digits).
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Max(math.Abs(a), math.Abs(b)) }

// Issue 31: the digest leaves out its zero-valued fields; read back, it is the digest written (no
// set pointer lost, no value changed), a host kept in full (its file could not be written) included.
func TestDigestOmitsOnlyZeros(t *testing.T) {
	s, _ := judgedFleet(t, 12, nil)
	dir := t.TempDir()
	if _, err := WriteSummary(dir, s, os.Stderr); err != nil {
		t.Fatal(err)
	}
	s.Hosts[3].DetailFile = "" // as if its file had failed: it stays in full
	want := digest(s, digestSummary)
	path := filepath.Join(dir, "again.json")
	if err := writeDigest(path, want); err != nil {
		t.Fatal(err)
	}
	back, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		i := 0
		for i < min(len(a), len(b)) && a[i] == b[i] {
			i++
		}
		t.Fatalf("read back, the digest differs at byte %d: wrote …%s…, read …%s…", i, a[max(0, i-200):min(len(a), i+100)], b[max(0, i-200):min(len(b), i+100)])
	}
	// Of the digests, that is (a host in full keeps its set pointers to zeros: memory_used_mib 0).
	if raw, _ := os.ReadFile(filepath.Join(dir, "summary.json")); bytes.Contains(raw, []byte(`:0,`)) || bytes.Contains(raw, []byte(`:false`)) || bytes.Contains(raw, []byte(`:""`)) {
		t.Error("the digest holds zero-valued fields")
	}
}
