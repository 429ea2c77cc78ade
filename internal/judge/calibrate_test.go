package judge

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/results"
)

func calibRuns() []CalibRun {
	a := healthy()
	a.syncTTFT, a.sustained = 40, 40
	b := healthy()
	b.syncTTFT, b.sustained = 46, 38 // the worst TTFT and the worst throughput
	c := healthy()
	c.syncTTFT, c.sustained, c.lowerBound = 44, 20, true // a truncated sweep: its 20 req/s must not count
	return []CalibRun{{Label: "run1.json", Summary: summary(a, a)}, {Label: "run2.json", Summary: summary(a, b)}, {Label: "run3.json", Summary: summary(c)}}
}

func TestCalibrate(t *testing.T) {
	entries, err := Calibrate(calibRuns(), DefaultCalibrateOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1 (one GPU name × one model)", len(entries))
	}
	e := entries[0]
	// TTFT: worst 46 ms + 30 % = 59.8 -> 60 (rounded up). Throughput: worst 38 − 25 % = 28.5.
	if e.TTFTP95Ms == nil || *e.TTFTP95Ms != 60 {
		t.Errorf("ttft %v, want 60", ptr(e.TTFTP95Ms))
	}
	if e.MinReqS == nil || *e.MinReqS != 28.5 {
		t.Errorf("min req/s %v, want 28.5 (the truncated 20 req/s left out)", ptr(e.MinReqS))
	}
	if e.ITLP95Ms != nil {
		t.Error("ITL set without --itl")
	}
	if len(e.TTFT) != 5 || len(e.ReqS) != 4 {
		t.Errorf("figures: %d TTFT (want 5), %d req/s (want 4)", len(e.TTFT), len(e.ReqS))
	}
	if !containsAny(e.Notes, "run3.json gpu 0 throughput 20.00 req/s left out") {
		t.Errorf("notes %v", e.Notes)
	}
	opt := DefaultCalibrateOptions()
	opt.ITL = true
	entries, _ = Calibrate(calibRuns(), opt)
	if e := entries[0]; e.ITLP95Ms == nil || *e.ITLP95Ms != 11 { // worst ITL 8 ms (all equal) × 1.3 = 10.4 -> 11
		t.Errorf("itl %v, want 11", ptr(e.ITLP95Ms))
	}
}

func TestCalibrateErrors(t *testing.T) {
	if _, err := Calibrate(nil, DefaultCalibrateOptions()); err == nil || !strings.Contains(err.Error(), "no runs") {
		t.Errorf("no runs: %v", err)
	}
	empty := &results.Summary{Hosts: []results.Host{{Name: "x"}}}
	if _, err := Calibrate([]CalibRun{{Label: "e.json", Summary: empty}}, DefaultCalibrateOptions()); err == nil || !strings.Contains(err.Error(), "nothing to calibrate") {
		t.Errorf("empty run: %v", err)
	}
	failed := summary(healthy())
	failed.Hosts[0].Models[0].Endpoints[0].Error = "engine died"
	entries, err := Calibrate([]CalibRun{{Label: "f.json", Summary: failed}}, DefaultCalibrateOptions())
	if err != nil || entries[0].TTFTP95Ms != nil || !containsAny(entries[0].Notes, "the endpoint failed") {
		t.Errorf("failed endpoint must be left out with a note: %+v %v", entries, err)
	}
}

// The printed YAML is ready to paste: it parses, under `reference:`, into the Config's table, and
// the reference then decides the gates of that GPU × model.
func TestCalibrationYAMLPastes(t *testing.T) {
	entries, err := Calibrate(calibRuns(), DefaultCalibrateOptions())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCalibrationYAML(&buf, entries, []string{"run1.json", "run2.json", "run3.json"}, DefaultCalibrateOptions()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"'NVIDIA H200':", "'Qwen/Qwen3-8B':", "ttft_p95_ms: 60", "min_throughput_req_s: 28.5",
		"# sync TTFT p95 (ms): worst 46.0 (run2.json gpu 1) of 5", "itl_p95_ms inherits the global gate"} {
		if !strings.Contains(out, want) {
			t.Errorf("YAML lacks %q:\n%s", want, out)
		}
	}
	var cfg Config
	if err := yaml.Unmarshal(buf.Bytes(), &cfg); err != nil {
		t.Fatalf("calibration YAML does not parse: %v\n%s", err, out)
	}
	cell := cfg.Reference[testGPU][testModel]
	if cell.TTFTP95Ms == nil || *cell.TTFTP95Ms != 60 || cell.MinThroughputReqS == nil || *cell.MinThroughputReqS != 28.5 || cell.ITLP95Ms != nil {
		t.Errorf("parsed cell %+v", cell)
	}
	def := DefaultConfig()
	def.Reference = cfg.Reference
	g := def.GatesFor(testGPU, testModel)
	if g.TTFTP95Ms.Source != SourceReference || g.ITLP95Ms.Source != SourceDefault {
		t.Errorf("sources after paste: ttft %s itl %s", g.TTFTP95Ms.Source, g.ITLP95Ms.Source)
	}
}

func TestYAMLQuote(t *testing.T) {
	var m map[string]int
	key := "it's: a #name"
	if err := yaml.Unmarshal([]byte(yamlQuote(key)+": 1\n"), &m); err != nil || m[key] != 1 {
		t.Errorf("quoted key did not round-trip: %v %v", m, err)
	}
}

// Config is plain data: it goes through YAML and comes back the same.
func TestConfigYAMLRoundTrip(t *testing.T) {
	c := DefaultConfig()
	c.Reference = map[string]map[string]Override{"NVIDIA L40S": {"Qwen/Qwen2.5-3B-Instruct": {TTFTP95Ms: fp(2000), MinThroughputReqS: fp(8)}}}
	c.GPUGates = map[string]Gates{"NVIDIA H100": c.Gates.with(Override{Disable: []string{results.ThresholdOf(results.ThITLP95Ms).Gate}}, "accelerator:h100")}
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, back) {
		t.Errorf("round trip changed the config:\n%s", b)
	}
	if !strings.Contains(string(b), "min_throughput_req_s:\n        value: null") {
		t.Errorf("a disabled gate must read as value: null:\n%s", b)
	}
}

// calibrate derives the interval rule's margin from healthy runs: 1.5 × the largest healthy gap.
func TestCalibrateMargin(t *testing.T) {
	s := summary(healthy(), healthy(), healthy().scaled(0.04))
	Apply(s, DefaultConfig())
	m, ok := CalibrateMargin([]CalibRun{{Label: "a.json", Summary: s}})
	if !ok || m.GPU != 2 || m.Pct != math.Ceil(1.5*m.GapPct) || m.GapPct < 4 || m.GapPct > 4.5 {
		t.Fatalf("margin %+v ok %v: want 1.5 × the 4 %% gap of gpu 2", m, ok)
	}
	var b strings.Builder
	if err := WriteMarginYAML(&b, []CalibRun{{Label: "a.json", Summary: s}}); err != nil || !strings.Contains(b.String(), fmt.Sprintf("variance_pct: %g\n", m.Pct)) {
		t.Errorf("yaml %q (%v)", b.String(), err)
	}
	if _, ok := CalibrateMargin([]CalibRun{{Label: "one", Summary: summary(healthy())}}); ok {
		t.Error("a single GPU derived a margin")
	}
}

// Issue 42: calibrate learns only from health. An ok run and a run with a 30 % straggler: the
// straggler run is not ok (NotOK says so and names its ok GPUs); taken with its ok GPUs named, the
// straggler is left out of the reference entry, and the margin is not widened by it (the issue's
// calibration proposed variance_pct 44 and floors of 0.41-0.48).
func TestCalibrateLearnsOnlyFromHealth(t *testing.T) {
	ok := summary(healthy(), healthy(), healthy(), healthy())
	Apply(ok, DefaultConfig())
	slow := summary(healthy(), healthy(), healthy().scaled(0.3), healthy())
	Apply(slow, DefaultConfig())
	if NotOK(ok) != "" || !strings.Contains(NotOK(slow), "its status is flag, not ok") || !strings.Contains(NotOK(slow), "its ok GPUs are 0,1,3") {
		t.Fatalf("ok run: %q (%s); straggler run: %q (%s)", NotOK(ok), ok.Status, NotOK(slow), slow.Status)
	}
	runs := []CalibRun{{Label: "ok.json", Summary: ok}, {Label: "slow.json", Summary: slow, GPUs: []int{0, 1, 2, 3}}}
	es, err := Calibrate(runs, DefaultCalibrateOptions())
	if err != nil || len(es) != 1 {
		t.Fatalf("%v %+v", err, es)
	}
	if !containsAny(es[0].Notes, "slow.json gpu 2 left out: its verdict is flag") {
		t.Errorf("notes %v", es[0].Notes)
	}
	for _, f := range es[0].ReqS {
		if f.Run == "slow.json" && f.GPU == 2 {
			t.Errorf("the straggler fed the throughput: %+v", es[0].ReqS)
		}
	}
	// 30 % × 40 req/s: the worst healthy 40 − 25 % = 30, not the straggler's 28 − 25 %.
	if es[0].MinReqS == nil || *es[0].MinReqS != 30 {
		t.Errorf("min req/s %v, want 30", ptr(es[0].MinReqS))
	}
	m, found := CalibrateMargin(runs)
	if !found || m.Pct > 5 || !containsAny(m.Notes, "slow.json gpu 2 left out") {
		t.Errorf("margin %+v: want the healthy cards' (≤ 5 %%) with the straggler left out", m)
	}
	// Without the named GPUs the run is not taken at all, and nothing of it feeds a table.
	runs[1].GPUs = []int{0}
	es, _ = Calibrate(runs, DefaultCalibrateOptions())
	if !containsAny(es[0].Notes, "slow.json gpu 1 left out: not among the GPUs named") {
		t.Errorf("notes %v", es[0].Notes)
	}
}

// A slow model's sustained req/s is under 1: its floor keeps two significant figures instead of
// rounding down to 0.1 req/s steps, which wrote min_throughput_req_s: 0 (a gate every run passes)
// for a worst of 0.12 req/s.
func TestCalibrateSlowModelFloor(t *testing.T) {
	for _, c := range []struct{ worst, want float64 }{{0.12, 0.09}, {0.05, 0.037}, {1.2, 0.9}, {38, 28.5}} {
		p := healthy()
		p.sustained = c.worst
		es, err := Calibrate([]CalibRun{{Label: "r.json", Summary: summary(p)}}, DefaultCalibrateOptions())
		if err != nil {
			t.Fatal(err)
		}
		if got := es[0].MinReqS; got == nil || math.Abs(*got-c.want) > 1e-9 {
			t.Errorf("worst %g req/s: min %v, want %g", c.worst, ptr(got), c.want)
		}
		var b bytes.Buffer
		if err := WriteCalibrationYAML(&b, es, []string{"r.json"}, DefaultCalibrateOptions()); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("min_throughput_req_s: %g\n", c.want); !strings.Contains(b.String(), want) {
			t.Errorf("worst %g req/s: the YAML lacks %q:\n%s", c.worst, want, b.String())
		}
	}
}
