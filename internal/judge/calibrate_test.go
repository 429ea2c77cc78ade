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
	return []CalibRun{{"run1.json", summary(a, a)}, {"run2.json", summary(a, b)}, {"run3.json", summary(c)}}
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
	if _, err := Calibrate([]CalibRun{{"e.json", empty}}, DefaultCalibrateOptions()); err == nil || !strings.Contains(err.Error(), "nothing to calibrate") {
		t.Errorf("empty run: %v", err)
	}
	failed := summary(healthy())
	failed.Hosts[0].Models[0].Endpoints[0].Error = "engine died"
	entries, err := Calibrate([]CalibRun{{"f.json", failed}}, DefaultCalibrateOptions())
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
	c.GPUGates = map[string]Gates{"NVIDIA H100": c.Gates.with(Override{Disable: []string{KeyITLP95}}, "accelerator:h100")}
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
