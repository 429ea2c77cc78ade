package judge

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

func verdict(t *testing.T, ep results.Endpoint, check string) results.Verdict {
	t.Helper()
	for _, v := range ep.Verdicts {
		if v.Check == check {
			return v
		}
	}
	t.Fatalf("no verdict %s in %+v", check, ep.Verdicts)
	return results.Verdict{}
}

// The "done when": 4 GPUs, one 30 % slower, flags that GPU and only it, for the right reason.
func TestApplyFlagsTheStragglerOnly(t *testing.T) {
	s := summary(healthy(), healthy(), healthy().scaled(0.30), healthy())
	Apply(s, DefaultConfig())

	m := s.Hosts[0].Models[0]
	for i, ep := range m.Endpoints {
		want := results.StatusOK
		if i == 2 {
			want = results.StatusFlag
		}
		if ep.Status != want {
			t.Errorf("gpu %d status %s, want %s (flags %+v)", i, ep.Status, want, ep.Flags)
		}
	}
	if len(s.Flags) == 0 {
		t.Fatal("no flag in the run")
	}
	var sawThroughput bool
	for _, fl := range s.Flags {
		if fl.Subject != testModel+" on gpu 2" {
			t.Errorf("flag on the wrong subject: %+v", fl)
		}
		if fl.Check != CheckGPUToGPU {
			t.Errorf("unexpected flag check %s: %s", fl.Check, fl.Reason)
		}
		if strings.HasPrefix(fl.Reason, MetricSustainedReqS) && strings.Contains(fl.Reason, "30.0 % below the median of the other GPUs") {
			sawThroughput = true
		}
	}
	if !sawThroughput {
		t.Errorf("no flag says sustained req/s is 30 %% below its peers: %+v", s.Flags)
	}
	// Its sync TTFT is 57 ms vs 40: +43 % but only 17 ms, under the 25 ms floor: not flagged.
	for _, c := range m.Comparisons {
		if c.Metric == MetricTTFTP95 && c.Values[2].Flagged {
			t.Errorf("TTFT spread of 17 ms flagged: %+v", c.Values[2])
		}
	}
	if m.Status != results.StatusFlag || s.Hosts[0].Status != results.StatusFlag || s.Status != results.StatusFlag {
		t.Errorf("roll-up: model %s host %s run %s, want flag everywhere", m.Status, s.Hosts[0].Status, s.Status)
	}
	if ExitCode(s, false, false) != 0 || ExitCode(s, true, false) != 1 {
		t.Errorf("exit codes: %d without --fail-on-flag (want 0), %d with (want 1)", ExitCode(s, false, false), ExitCode(s, true, false))
	}
	var metrics []string
	for _, c := range m.Comparisons {
		metrics = append(metrics, c.Metric)
	}
	if got := strings.Join(metrics, ","); got != "sustained_req_s,output_tok_s_peak,ttft_p95_ms,itl_p95_ms,tpot_p95_ms,tpot_p50_ms" {
		t.Errorf("comparisons %s: want every LLM metric of a sweep", got)
	}
}

// A card 5 % slower is within the 10 % margin: ok, nothing flagged.
func TestApplyHealthyRunIsOK(t *testing.T) {
	s := summary(healthy(), healthy().scaled(0.05), healthy())
	Apply(s, DefaultConfig())
	if s.Status != results.StatusOK || len(s.Flags) != 0 {
		t.Fatalf("status %s flags %+v, want ok and none", s.Status, s.Flags)
	}
	v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], "gate.ttft_p95")
	if v.Result != ResultPass || v.Source != SourceDefault || *v.Threshold != 200 || *v.Value != 40 {
		t.Errorf("ttft verdict %+v", v)
	}
	if s.Meta.Thresholds["gate.ttft_p95_ms"].Source != SourceDefault {
		t.Errorf("thresholds not recorded in meta: %+v", s.Meta.Thresholds)
	}
}

// The seed's slow 2× T4: 3-vs-4 requests, a spurious 25 % spread: low confidence, no flag, and not
// ok either: a comparison that could not decide makes the model, host and run inconclusive.
func TestApplySeedT4LowConfidence(t *testing.T) {
	a, b := healthy(), healthy()
	a.sustained, a.requests = 0.2, 4
	b.sustained, b.requests = 0.15, 3
	s := summary(a, b)
	cfg := DefaultConfig()
	cfg.Gates.TTFTP95Ms.Value, cfg.Gates.ITLP95Ms.Value = nil, nil
	Apply(s, cfg)
	for _, c := range s.Hosts[0].Models[0].Comparisons {
		if !c.LowConfidence {
			t.Errorf("%s: not low confidence with 3 vs 4 requests", c.Metric)
		}
	}
	if len(s.Flags) != 0 || s.Status != results.StatusInconclusive || s.Hosts[0].Status != results.StatusInconclusive || s.Hosts[0].Models[0].Status != results.StatusInconclusive {
		t.Errorf("flags %+v status %s (host %s, model %s), want none and inconclusive", s.Flags, s.Status, s.Hosts[0].Status, s.Hosts[0].Models[0].Status)
	}
	s.Complete = true
	if ExitCode(s, true, false) != 0 || ExitCode(s, false, true) != 1 {
		t.Errorf("inconclusive exits %d (want 0) without --fail-on-inconclusive, %d (want 1) with", ExitCode(s, true, false), ExitCode(s, false, true))
	}
}

func TestApplyGates(t *testing.T) {
	slow := healthy()
	slow.syncTTFT, slow.syncITL = 260, 60
	tests := []struct {
		name   string
		p      perf
		cfg    func(*Config)
		check  string
		result string
		source string
		thr    float64
		reason string
	}{
		{"default TTFT gate fails", slow, nil, "gate.ttft_p95", ResultFail, SourceDefault, 200, "calibrate a reference entry"},
		{"default ITL gate fails", slow, nil, "gate.itl_p95", ResultFail, SourceDefault, 50, "60.0 ms > 50.0 ms"},
		{"reference entry passes it", slow, func(c *Config) {
			c.Reference = map[string]map[string]Override{testGPU: {testModel: {TTFTP95Ms: fp(300)}}}
		}, "gate.ttft_p95", ResultPass, SourceReference, 300, "within"},
		{"reference for another model does not apply", slow, func(c *Config) {
			c.Reference = map[string]map[string]Override{testGPU: {"Qwen/Qwen3-0.6B": {TTFTP95Ms: fp(300)}}}
		}, "gate.ttft_p95", ResultFail, SourceDefault, 200, ""},
		{"reference is partial: ITL inherits", slow, func(c *Config) {
			c.Reference = map[string]map[string]Override{testGPU: {testModel: {TTFTP95Ms: fp(300)}}}
		}, "gate.itl_p95", ResultFail, SourceDefault, 50, ""},
		{"accelerator override (resolved by the plan)", slow, func(c *Config) {
			g := c.Gates
			g.ITLP95Ms = Limit{Value: fp(70), Unit: "ms", Source: "accelerator:h200"}
			c.GPUGates = map[string]Gates{testGPU: g}
		}, "gate.itl_p95", ResultPass, "accelerator:h200", 70, ""},
		{"null disables", slow, func(c *Config) { c.Gates.TTFTP95Ms = Limit{Source: "config:site.yaml"} },
			"gate.ttft_p95", ResultDisabled, "config:site.yaml", 0, "disabled"},
		{"throughput floor off by default", healthy(), nil, "gate.sustained_req_s", ResultDisabled, SourceDefault, 0, ""},
		{"throughput floor met", healthy(), func(c *Config) { c.Gates.MinThroughputReqS = Limit{Value: fp(30), Source: "flag"} },
			"gate.sustained_req_s", ResultPass, "flag", 30, ""},
		{"throughput floor missed", healthy(), func(c *Config) { c.Gates.MinThroughputReqS = Limit{Value: fp(50), Source: "flag"} },
			"gate.sustained_req_s", ResultFail, "flag", 50, "40.0 req/s < 50.0 req/s"},
		{"floor missed on a truncated sweep is inconclusive", perf{syncTTFT: 40, syncITL: 8, syncTPOT: 8, sustained: 40, outTokPerReq: 256, requests: 900, lowerBound: true},
			func(c *Config) { c.Gates.MinThroughputReqS = Limit{Value: fp(50), Source: "flag"} },
			"gate.sustained_req_s", ResultInconclusive, "flag", 50, "truncated or unsaturated"},
		{"floor met on a truncated sweep passes", perf{syncTTFT: 40, syncITL: 8, syncTPOT: 8, sustained: 40, outTokPerReq: 256, requests: 900, lowerBound: true},
			func(c *Config) { c.Gates.MinThroughputReqS = Limit{Value: fp(30), Source: "flag"} },
			"gate.sustained_req_s", ResultPass, "flag", 30, "lower bound"},
		{"TTFT breach on a truncated sweep is inconclusive", perf{syncTTFT: 260, syncITL: 8, syncTPOT: 8, sustained: 40, outTokPerReq: 256, requests: 900, lowerBound: true},
			nil, "gate.ttft_p95", ResultInconclusive, SourceDefault, 200, "inconclusive"},
		{"aicr gates stay quiet without a concurrency run", healthy(), func(c *Config) { c.Gates.AICRMinOutputTokS = Limit{Value: fp(1000), Source: "recipe:r.yaml"} },
			"gate.aicr_throughput", ResultInconclusive, "recipe:r.yaml", 900, "no concurrency run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			s := summary(tc.p)
			Apply(s, cfg)
			ep := s.Hosts[0].Models[0].Endpoints[0]
			v := verdict(t, ep, tc.check)
			if v.Result != tc.result || v.Source != tc.source {
				t.Errorf("result %s source %s, want %s %s (%s)", v.Result, v.Source, tc.result, tc.source, v.Reason)
			}
			if tc.thr != 0 && (v.Threshold == nil || *v.Threshold != tc.thr) {
				t.Errorf("threshold %v, want %v", v.Threshold, tc.thr)
			}
			if !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", v.Reason, tc.reason)
			}
			flagged := false
			for _, fl := range ep.Flags {
				flagged = flagged || fl.Check == tc.check
			}
			if flagged != (tc.result == ResultFail) {
				t.Errorf("flagged %v for a %s verdict", flagged, tc.result)
			}
		})
	}
}

func TestApplyAICRGates(t *testing.T) {
	conc := func(outTokS, ttftP99 float64, gpus []int) *results.Summary {
		s := summary(healthy())
		ep := &s.Hosts[0].Models[0].Endpoints[0]
		ep.GPUs = gpus
		ep.Load = &results.Load{Config: results.LoadConfig{Profile: "concurrency", Concurrency: 256}, Runs: []results.Run{{
			Kind: RunConcurrency, Concurrency: 256, WindowSeconds: 60, Requests: results.RequestCounts{Successful: 4000},
			TTFT: results.Dist{Count: 4000, P50: ttftP99 / 2, P95: ttftP99 * 0.9, P99: ttftP99}, OutputTokS: outTokS}}}
		return s
	}
	tests := []struct {
		name            string
		out, ttft       float64
		gpus            []int
		nodeGPUs        int
		thrRes, ttftRes string
		thr             float64
	}{
		{"within the 10 % tolerance", 46000, 2150, []int{0}, 0, ResultPass, ResultPass, 45000},
		{"below 0.9 × X", 44000, 1000, []int{0}, 0, ResultFail, ResultPass, 45000},
		{"above 1.1 × Y", 60000, 2300, []int{0}, 0, ResultPass, ResultFail, 45000},
		{"node floor normalized per GPU", 12000, 1000, []int{0}, 4, ResultPass, ResultPass, 11250},
		{"node floor for a tp=2 group", 22000, 1000, []int{0, 1}, 4, ResultFail, ResultPass, 22500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Gates.AICRMinOutputTokS = Limit{Value: fp(50000), Source: "recipe:gb200.yaml"}
			cfg.Gates.AICRMaxTTFTP99Ms = Limit{Value: fp(2000), Source: "recipe:gb200.yaml"}
			cfg.AICRNodeGPUs = tc.nodeGPUs
			s := conc(tc.out, tc.ttft, tc.gpus)
			Apply(s, cfg)
			ep := s.Hosts[0].Models[0].Endpoints[0]
			vt, vl := verdict(t, ep, "gate.aicr_throughput"), verdict(t, ep, "gate.aicr_ttft_p99")
			if vt.Result != tc.thrRes || vl.Result != tc.ttftRes {
				t.Errorf("throughput %s (%s), ttft %s (%s); want %s, %s", vt.Result, vt.Reason, vl.Result, vl.Reason, tc.thrRes, tc.ttftRes)
			}
			if d := *vt.Threshold - tc.thr; d > 1e-6 || d < -1e-6 {
				t.Errorf("throughput threshold %v, want %v", *vt.Threshold, tc.thr)
			}
			if *vl.Threshold < 2199.99 || *vl.Threshold > 2200.01 {
				t.Errorf("ttft p99 threshold %v, want 2200", *vl.Threshold)
			}
			if vt.Source != "recipe:gb200.yaml" {
				t.Errorf("source %q", vt.Source)
			}
			// The sync gates have no sync run here: inconclusive, not a silent pass.
			if v := verdict(t, ep, "gate.ttft_p95"); v.Result != ResultInconclusive {
				t.Errorf("sync TTFT without a sync run: %s", v.Result)
			}
		})
	}
}

func TestApplyRollUp(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *results.Summary)
		ep0    results.Status
		model  results.Status
		host   results.Status
		run    results.Status
		check  string // a flag check that must be in s.Flags
	}{
		{"failed conformance test flags the model", func(s *results.Summary) {
			s.Hosts[0].Models[0].Endpoints[0].Functional.Tests = append(s.Hosts[0].Models[0].Endpoints[0].Functional.Tests,
				results.FunctionalTest{Name: "stream_done", Passed: false, Detail: "no [DONE]"})
		}, results.StatusFlag, results.StatusFlag, results.StatusFlag, results.StatusFlag, "functional.stream_done"},
		{"unrunnable suite is a failure", func(s *results.Summary) {
			s.Hosts[0].Models[0].Endpoints[0].Functional = &results.Functional{Status: results.StatusFailed, Error: "connection refused"}
		}, results.StatusFailed, results.StatusFailed, results.StatusFailed, results.StatusFailed, ""},
		{"engine failed to start", func(s *results.Summary) {
			ep := &s.Hosts[0].Models[0].Endpoints[0]
			ep.Load, ep.Functional, ep.Error = nil, nil, "engine exited with status 1"
		}, results.StatusFailed, results.StatusFailed, results.StatusFailed, results.StatusFailed, ""},
		{"load with no run is a failure", func(s *results.Summary) {
			s.Hosts[0].Models[0].Endpoints[0].Load = &results.Load{Error: "connect: refused"}
		}, results.StatusFailed, results.StatusFailed, results.StatusFailed, results.StatusFailed, ""},
		{"interrupted load keeps its runs and flags", func(s *results.Summary) {
			s.Hosts[0].Models[0].Endpoints[0].Load.Error = "interrupted"
		}, results.StatusFlag, results.StatusFlag, results.StatusFlag, results.StatusFlag, CheckLoadPartial},
		{"health flag rolls up to host and run", func(s *results.Summary) {
			g := &s.Hosts[0].Health.GPUs[1]
			g.Status = results.StatusFlag
			g.Flags = []results.Flag{{Scope: "gpu", Subject: "gpu 1", Check: "health.ecc", Reason: "2 uncorrected ECC errors"}}
			s.Hosts[0].Health.Status = results.StatusFlag
		}, results.StatusOK, results.StatusOK, results.StatusFlag, results.StatusFlag, "health.ecc"},
		{"failed health phase fails the host", func(s *results.Summary) {
			s.Hosts[0].Health.Status, s.Hosts[0].Health.Error = results.StatusFailed, "nvml: driver not loaded"
		}, results.StatusOK, results.StatusOK, results.StatusFailed, results.StatusFailed, ""},
		{"skipped DCGM is not a failure", func(s *results.Summary) {
			s.Hosts[0].Health.DCGM = &results.DCGM{Status: results.StatusSkipped, Note: "dcgmi not installed"}
		}, results.StatusOK, results.StatusOK, results.StatusOK, results.StatusOK, ""},
		{"discovery error fails the host", func(s *results.Summary) {
			s.Hosts[0].Discovery.Error = "nvidia-smi: not found"
		}, results.StatusOK, results.StatusOK, results.StatusFailed, results.StatusFailed, ""},
		{"run error fails the run", func(s *results.Summary) { s.Error = "interrupted" },
			results.StatusOK, results.StatusOK, results.StatusOK, results.StatusFailed, ""},
		{"no hosts is never a silent pass", func(s *results.Summary) { s.Hosts = nil }, "", "", "", results.StatusFailed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := summary(healthy(), healthy())
			tc.mutate(s)
			Apply(s, DefaultConfig())
			if s.Status != tc.run {
				t.Errorf("run %s, want %s (%s)", s.Status, tc.run, s.Error)
			}
			if len(s.Hosts) > 0 {
				h := s.Hosts[0]
				if h.Status != tc.host || h.Models[0].Status != tc.model || h.Models[0].Endpoints[0].Status != tc.ep0 {
					t.Errorf("host %s model %s ep0 %s, want %s %s %s", h.Status, h.Models[0].Status, h.Models[0].Endpoints[0].Status, tc.host, tc.model, tc.ep0)
				}
			}
			if tc.check != "" {
				found := false
				for _, fl := range s.Flags {
					found = found || fl.Check == tc.check
				}
				if !found {
					t.Errorf("no %s flag in %+v", tc.check, s.Flags)
				}
			}
			want := 0
			if tc.run == results.StatusFailed {
				want = 1
			}
			if ExitCode(s, false, false) != want {
				t.Errorf("exit code %d, want %d", ExitCode(s, false, false), want)
			}
		})
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	s := summary(healthy(), healthy().scaled(0.4))
	s.Hosts[0].Models[0].Endpoints[1].Flags = []results.Flag{{Scope: "gpu", Check: "load.client_limited", Reason: "client lag"}}
	Apply(s, DefaultConfig())
	first, _ := json.Marshal(s)
	Apply(s, DefaultConfig())
	second, _ := json.Marshal(s)
	if string(first) != string(second) {
		t.Errorf("a second Apply changed the summary")
	}
	var keep bool
	for _, fl := range s.Hosts[0].Models[0].Endpoints[1].Flags {
		keep = keep || fl.Check == "load.client_limited"
	}
	if !keep {
		t.Errorf("Apply dropped a flag it does not own")
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		st         results.Status
		failOnFlag bool
		want       int
	}{
		{results.StatusOK, false, 0}, {results.StatusOK, true, 0}, {results.StatusFlag, false, 0},
		{results.StatusFlag, true, 1}, {results.StatusFailed, false, 1}, {results.StatusSkipped, true, 0},
		{results.StatusInterrupted, false, 1}, {results.StatusIncomplete, false, 1},
	}
	for _, tc := range tests {
		if got := ExitCode(&results.Summary{Status: tc.st, Complete: true}, tc.failOnFlag, false); got != tc.want {
			t.Errorf("ExitCode(%s, %v) = %d, want %d", tc.st, tc.failOnFlag, got, tc.want)
		}
	}
	if ExitCode(nil, false, false) != 1 {
		t.Error("nil summary must exit 1")
	}
	// A killed run's file says ok in old versions: complete=false alone is a failure.
	if ExitCode(&results.Summary{Status: results.StatusOK}, false, false) != 1 {
		t.Error("an incomplete summary must exit 1")
	}
}

// The plan resolves each GPU's accelerators entries (all that match, the most specific last); the
// judge reads them with their sources and lays the reference cell on top.
func TestGatesFor(t *testing.T) {
	site := filepath.Join(t.TempDir(), "site.yaml")
	os.WriteFile(site, []byte(`
accelerators:
  h200: {gates: {ttft_p95_ms: 150, itl_p95_ms: 40}}
  "NVIDIA H200 NVL": {gates: {ttft_p95_ms: 120}}
  l40s: {gates: {itl_p95_ms: null}}
reference:
  "NVIDIA H200 NVL": {"`+testModel+`": {itl_p95_ms: 30}}
`), 0o644)
	p, err := config.Load(config.Options{Files: []string{site}})
	if err != nil {
		t.Fatal(err)
	}
	gpus := []string{"NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA L40S", "NVIDIA H100 80GB HBM3"}
	cfg := FromPlan(p, gpus)
	type lim struct {
		v   *float64
		src string
	}
	tests := []struct {
		gpu, model string
		ttft, itl  lim
	}{
		{"NVIDIA H200", testModel, lim{fp(150), "accelerator:h200"}, lim{fp(40), "accelerator:h200"}},
		{"NVIDIA H200 NVL", testModel, lim{fp(120), "accelerator:NVIDIA H200 NVL"}, lim{fp(30), SourceReference}},
		{"NVIDIA H200 NVL", "other/model", lim{fp(120), "accelerator:NVIDIA H200 NVL"}, lim{fp(40), "accelerator:h200"}},
		{"NVIDIA L40S", testModel, lim{fp(200), SourceDefault}, lim{nil, "accelerator:l40s"}},
		{"NVIDIA H100 80GB HBM3", testModel, lim{fp(200), SourceDefault}, lim{fp(50), SourceDefault}},
	}
	for _, tc := range tests {
		g := cfg.GatesFor(tc.gpu, tc.model)
		got := []lim{{g.TTFTP95Ms.Value, g.TTFTP95Ms.Source}, {g.ITLP95Ms.Value, g.ITLP95Ms.Source}}
		for i, want := range []lim{tc.ttft, tc.itl} {
			if !reflect.DeepEqual(got[i].v, want.v) || !hasPrefix(got[i].src, want.src) {
				t.Errorf("%s × %s gate %d: %v %s, want %v %s", tc.gpu, tc.model, i, ptr(got[i].v), got[i].src, ptr(want.v), want.src)
			}
		}
	}
	if cfg.Gates.ITLP95Ms.Value == nil || *cfg.Gates.ITLP95Ms.Value != 50 {
		t.Error("GatesFor changed the global gates")
	}
}

func ptr(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		errSub string
	}{
		{"defaults are valid", func(*Config) {}, ""},
		{"negative gate", func(c *Config) { c.Gates.TTFTP95Ms.Value = fp(-1) }, "gates.ttft_p95_ms: -1 is negative"},
		{"variance 100", func(c *Config) { c.LLMVariancePct.Value = fp(100) }, "compare.variance_pct: 100 % would never flag"},
		// YAML's .nan and .inf: a NaN limit failed every gate, and either made summary.json unwritable.
		{"NaN gate", func(c *Config) { c.Gates.TTFTP95Ms.Value = fp(math.NaN()) }, "gates.ttft_p95_ms: NaN is not a number"},
		{"Inf gate", func(c *Config) { c.Gates.ITLP95Ms.Value = fp(math.Inf(1)) }, "gates.itl_p95_ms: +Inf is not a number"},
		{"NaN variance", func(c *Config) { c.LLMVariancePct.Value = fp(math.NaN()) }, "compare.variance_pct: NaN is not a number"},
		{"NaN reference value", func(c *Config) {
			c.Reference = map[string]map[string]Override{"NVIDIA H100": {"m": {ITLP95Ms: fp(math.NaN())}}}
		}, `reference["NVIDIA H100"]["m"].itl_p95_ms: NaN is not a number`},
		{"variance unset", func(c *Config) { c.GEMMVariancePct.Value = nil }, "gemm_variance_pct: not set"},
		{"zero config", func(c *Config) { *c = Config{} }, "compare.variance_pct: not set"},
		{"bad scope", func(c *Config) { c.AICRThroughputScope = "rack" }, `aicr_throughput_scope: "rack"`},
		{"unknown disable key", func(c *Config) {
			c.Reference = map[string]map[string]Override{"NVIDIA L40S": {"m": {Disable: []string{"ttft"}}}}
		}, `reference["NVIDIA L40S"]["m"].disable: unknown gate "ttft"`},
		{"negative reference value", func(c *Config) {
			c.Reference = map[string]map[string]Override{"NVIDIA H100": {"m": {ITLP95Ms: fp(-5)}}}
		}, `reference["NVIDIA H100"]["m"].itl_p95_ms: -5 is negative`},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mutate(&c)
		err := c.Validate()
		if (err == nil) != (tc.errSub == "") || (err != nil && !strings.Contains(err.Error(), tc.errSub)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.errSub)
		}
	}
}

func TestJudgeGate(t *testing.T) {
	lim := Limit{Value: fp(200), Source: SourceDefault}
	spec := GateSpec{Check: "gate.ttft_p95", Name: "sync TTFT p95", Unit: "ms", Upper: true, Limit: lim}
	tests := []struct {
		name string
		spec GateSpec
		m    Measured
		want string
	}{
		{"at the limit passes", spec, Measured{Present: true, Figure: compare.Figure{Value: 200}}, ResultPass},
		{"over fails", spec, Measured{Present: true, Figure: compare.Figure{Value: 200.1}}, ResultFail},
		{"not measured is inconclusive", spec, Measured{Missing: "no sync run"}, ResultInconclusive},
		{"client-limited breach is inconclusive", spec, Measured{Present: true, Figure: compare.Figure{Value: 900, ClientLimited: true}}, ResultInconclusive},
		{"client-limited pass stays a pass", spec, Measured{Present: true, Figure: compare.Figure{Value: 90, ClientLimited: true}}, ResultPass},
		{"disabled", GateSpec{Name: "x", Limit: Limit{Source: "flag"}}, Measured{Present: true, Figure: compare.Figure{Value: 1}}, ResultDisabled},
		{"floor: at the limit passes", GateSpec{Name: "t", Limit: lim}, Measured{Present: true, Figure: compare.Figure{Value: 200}}, ResultPass},
		{"floor: under fails", GateSpec{Name: "t", Limit: lim}, Measured{Present: true, Figure: compare.Figure{Value: 199}}, ResultFail},
		{"factor applies", GateSpec{Name: "t", Limit: lim, Factor: 0.9}, Measured{Present: true, Figure: compare.Figure{Value: 181}}, ResultPass},
		{"too few samples: inconclusive, not a pass", spec, Measured{Present: true, Figure: compare.Figure{Value: 20, Samples: 3}}, ResultInconclusive},
		{"too few samples: inconclusive, not a fail", spec, Measured{Present: true, Figure: compare.Figure{Value: 900, Samples: 3}}, ResultInconclusive},
		{"enough samples fail", spec, Measured{Present: true, Figure: compare.Figure{Value: 900, Samples: 30}}, ResultFail},
		{"CI spanning the limit: inconclusive", GateSpec{Name: "t", Unit: "tok/s", Limit: Limit{Value: fp(11250), Source: "recipe"}},
			Measured{Present: true, Figure: compare.Figure{Value: 9661, Samples: 1000, CI: ci(6809, 12623)}}, ResultInconclusive},
		{"CI wholly under the floor: fail", GateSpec{Name: "t", Unit: "tok/s", Limit: Limit{Value: fp(11250), Source: "recipe"}},
			Measured{Present: true, Figure: compare.Figure{Value: 9661, Samples: 1000, CI: ci(9000, 10000)}}, ResultFail},
		{"lower-bound throughput under the floor: inconclusive", GateSpec{Name: "t", Limit: lim},
			Measured{Present: true, Figure: compare.Figure{Value: 100, LowerBound: true}}, ResultInconclusive},
	}
	for _, tc := range tests {
		if got := JudgeGate(tc.spec, tc.m, 30); got.Result != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.Result, got.Reason, tc.want)
		}
	}
}

// A concurrency-only (aicr-style) profile is compared GPU to GPU on its concurrency-run figures.
func TestApplyComparesConcurrencyRuns(t *testing.T) {
	s := summary(healthy(), healthy(), healthy())
	for i := range s.Hosts[0].Models[0].Endpoints {
		out := 60000.0
		if i == 1 {
			out = 42000 // 30 % slower
		}
		s.Hosts[0].Models[0].Endpoints[i].Load = &results.Load{Config: results.LoadConfig{Profile: "concurrency", Concurrency: 256},
			SustainedReqS: out / 256, Runs: []results.Run{{Kind: RunConcurrency, Concurrency: 256, Requests: results.RequestCounts{Successful: 5000},
				OutputTokS: out, TTFT: results.Dist{Count: 5000, P95: 700, P99: 800}, CI: &results.Intervals{OutputTokS: ci(out*0.99, out*1.01)}}}}
	}
	cfg := DefaultConfig()
	cfg.Gates.TTFTP95Ms.Value, cfg.Gates.ITLP95Ms.Value = nil, nil
	Apply(s, cfg)
	if s.Status != results.StatusFlag {
		t.Fatalf("status %s", s.Status)
	}
	found := false
	for _, fl := range s.Flags {
		if fl.Subject != testModel+" on gpu 1" {
			t.Errorf("flag on %s: %s", fl.Subject, fl.Reason)
		}
		found = found || strings.HasPrefix(fl.Reason, MetricConcOutputTokS+" 42000 on gpu 1 is 30.0 % below")
	}
	if !found {
		t.Errorf("no concurrency-run throughput flag: %+v", s.Flags)
	}
}

func TestApplyIdempotentWithFailures(t *testing.T) {
	s := summary(healthy(), healthy().scaled(0.3), healthy())
	s.Hosts[0].Models[0].Endpoints[1].Functional = &results.Functional{Status: results.StatusFailed, Error: "suite could not connect"}
	s.Hosts[0].Models[0].Endpoints[2].Load.Error = "interrupted"
	Apply(s, DefaultConfig())
	first, _ := json.Marshal(s)
	Apply(s, DefaultConfig())
	second, _ := json.Marshal(s)
	if string(first) != string(second) {
		t.Error("a second Apply changed a summary with failures")
	}
	if s.Hosts[0].Models[0].Endpoints[1].Status != results.StatusFailed || s.Status != results.StatusFailed {
		t.Errorf("statuses: ep1 %s run %s", s.Hosts[0].Models[0].Endpoints[1].Status, s.Status)
	}
}

func TestAICRThroughputScope(t *testing.T) {
	tests := []struct {
		name     string
		scope    string
		nodeGPUs int
		hostGPUs int
		epGPUs   []int
		want     float64
	}{
		{"node floor, this host's 4 GPUs", ScopeNode, 0, 4, []int{0}, 50000 * 0.9 / 4},
		{"node floor, a recipe measured on 8", ScopeNode, 8, 4, []int{0}, 50000 * 0.9 / 8},
		{"per-GPU floor", ScopeGPU, 0, 4, []int{0}, 50000 * 0.9},
		{"per-GPU floor on a tp=2 group", ScopeGPU, 0, 4, []int{0, 1}, 50000 * 0.9 * 2},
	}
	for _, tc := range tests {
		cfg := DefaultConfig()
		cfg.Gates.AICRMinOutputTokS = Limit{Value: fp(50000), Source: "recipe:r.yaml"}
		cfg.AICRThroughputScope, cfg.AICRNodeGPUs = tc.scope, tc.nodeGPUs
		ep := endpoint(0, healthy())
		ep.GPUs = tc.epGPUs
		ep.Load.Runs = append(ep.Load.Runs, results.Run{Kind: RunConcurrency, Concurrency: 256, Requests: results.RequestCounts{Successful: 100}, OutputTokS: 1})
		v := EndpointVerdicts(&ep, testModel, tc.hostGPUs, cfg)
		var thr *float64
		for _, x := range v {
			if x.Check == "gate.aicr_throughput" {
				thr = x.Threshold
			}
		}
		if thr == nil || math.Abs(*thr-tc.want) > 1e-6 {
			t.Errorf("%s: threshold %v, want %v", tc.name, ptr(thr), tc.want)
		}
	}
}

// A rung that overloaded the client makes its own figures inconclusive, not those of a rung the
// client kept up with: the synchronous run's TTFT breach is still a failure.
func TestClientLimitedIsPerRun(t *testing.T) {
	slow := healthy()
	slow.syncTTFT = 260
	for _, syncLimited := range []bool{false, true} {
		s := summary(slow)
		l := s.Hosts[0].Models[0].Endpoints[0].Load
		top := &l.Runs[len(l.Runs)-1]
		top.ClientLimited, top.ClientReason = true, "CLIENT-LIMITED: x"
		l.Runs[0].ClientLimited = syncLimited
		l.Client.ClientLimited, l.Client.Reason = true, "constant rung: CLIENT-LIMITED: x"
		Apply(s, DefaultConfig())
		want := ResultFail
		if syncLimited {
			want = ResultInconclusive
		}
		if v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], "gate.ttft_p95"); v.Result != want {
			t.Errorf("sync run limited %v: gate.ttft_p95 %s (%s), want %s", syncLimited, v.Result, v.Reason, want)
		}
	}
}

// Issue 55 (the README's rule): GPUs loaded at once by one load generator that fell behind on one
// rung of one of them decide none of their GPU-to-GPU cells, the synchronous rung's included, and
// each comparison says why; loaded one at a time, the rungs the client kept up with still decide.
func TestSharedClientLimitedDecidesNoCell(t *testing.T) {
	m := summary(healthy(), healthy(), healthy().scaled(0.3), healthy()).Hosts[0].Models[0]
	m.Endpoints[1].Load.Runs[2].ClientLimited = true // one constant rung of one GPU
	decided := func(cs []results.Compare) (n int) {
		for _, c := range cs {
			for _, v := range c.Values {
				if !v.Inconclusive {
					n++
				}
			}
		}
		return n
	}
	shared := ModelComparisons(&m, DefaultConfig().LLMGuardsFrom(), true)
	if len(shared) == 0 || decided(shared) != 0 {
		t.Fatalf("shared client: %d comparisons, %d cells decided; want none decided", len(shared), decided(shared))
	}
	for _, c := range shared {
		if !c.ClientLimited || !strings.Contains(c.Note, "--parallel-gpus 1") {
			t.Errorf("%s: client-limited %v, note %q", c.Metric, c.ClientLimited, c.Note)
		}
	}
	alone := ModelComparisons(&m, DefaultConfig().LLMGuardsFrom(), false)
	if decided(alone) == 0 {
		t.Errorf("loaded one at a time: no cell decided")
	}
	// The GPUs it left undecided have one finding that says why and what decides them: the client's.
	m.Comparisons = shared
	f, ok := undecidedComparisons("h", &m)
	if !ok || f.Layer != results.LayerClient || f.Action != results.ActionRerun || f.Status != results.StatusInconclusive ||
		!strings.Contains(f.Reason, "--parallel-gpus") || len(f.GPUs) != len(m.Endpoints) {
		t.Errorf("finding of the undecided comparisons: %+v", f)
	}
	m.Comparisons = alone
	if f, ok := undecidedComparisons("h", &m); ok && f.Check == checkClientLimited {
		t.Errorf("loaded one at a time, the comparisons blamed on the client: %+v", f)
	}
}

// Issue 53: the report looked the TTFT gate up as "ttft_p95_ms" where the judge wrote
// "gate.ttft_p95_ms" (and its fixture planted the wrong key). Both read results' names now.
func TestMetaThresholdsUseTheSummarysKeys(t *testing.T) {
	s := summary(healthy())
	Apply(s, DefaultConfig())
	for key, want := range map[string]float64{results.ThresholdOf(results.ThTTFTP95Ms).Summary: 200, results.ThresholdOf(results.ThBaselineTolerance).Summary: results.DefaultOf(results.ThBaselineTolerance)} {
		if th, ok := s.Meta.Thresholds[key]; !ok || th.Value == nil || *th.Value != want {
			t.Errorf("meta.thresholds[%q] = %+v, want %g", key, th, want)
		}
	}
}

// A GPU flagged by one figure and undecided in another has its flag's finding only; a GPU left
// undecided alone gets the comparisons' finding with the cell's reason.
func TestUndecidedComparisonOfAFlaggedGPUAddsNoFinding(t *testing.T) {
	m := &results.Model{Model: "m", Comparisons: []results.Compare{
		{Metric: "tpot_p50_ms", Values: []results.CompareCell{{GPU: 0}, {GPU: 1, Flagged: true}}},
		{Metric: "tpot_p95_ms", Values: []results.CompareCell{{GPU: 0}, {GPU: 1, Inconclusive: true, Reason: "no confidence interval"}}},
	}}
	if f, ok := undecidedComparisons("h", m); ok {
		t.Errorf("flagged GPU's undecided figure: %+v", f)
	}
	m.Comparisons[0].Values[1].Flagged = false
	f, ok := undecidedComparisons("h", m)
	if !ok || f.Layer != results.LayerClient || !slices.Equal(f.GPUs, []int{1}) || !strings.Contains(f.Reason, "no confidence interval") {
		t.Errorf("undecided GPU: %v %+v", ok, f)
	}
}

// A card measured while the host's CPUs starved its engine (GPUs vetted one after the other, other
// work on the host during one of them) is not flagged for what the wait alone explains: its
// comparisons are inconclusive and say so; the same card with its engine's wait no longer than the
// others' is flagged.
func TestApplyLeavesAStarvedEngineToTheHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  float64
		want  results.Status
		words string
		pod   bool // the host's CPU pressure, read by a load Job beside the engine's pod
	}{
		{"its engine waited 40 % of its runnable time, the others' 2 %", 40, results.StatusInconclusive, "waited for a CPU 40 % of the time they were runnable in this rung (the reference's 2 %)", false},
		{"its engine waited as long as the others'", 2, results.StatusFlag, "beyond the 10 % margin", false},
		{"its node's CPUs were contended 40 % of its rungs, the others' 2 %", 40, results.StatusInconclusive, "some task on the engine's host waited for a CPU 40 % of this rung (the host's CPU pressure", true},
		{"its node as quiet as the others'", 2, results.StatusFlag, "beyond the 10 % margin", true},
	} {
		s := summary(healthy(), healthy(), healthy().scaled(0.30), healthy())
		for i := range s.Hosts[0].Models[0].Endpoints {
			w := 2.0
			if i == 2 {
				w = tc.wait
			}
			for j := range s.Hosts[0].Models[0].Endpoints[i].Load.Runs {
				if r := &s.Hosts[0].Models[0].Endpoints[i].Load.Runs[j]; tc.pod {
					r.HostCPUPressurePct = fp(w)
				} else {
					r.EngineCPUWaitPct = fp(w)
				}
			}
		}
		Apply(s, DefaultConfig())
		if g := s.Hosts[0].GPUs[2]; g.Status != tc.want {
			t.Errorf("%s: gpu 2 %s, want %s (%+v)", tc.name, g.Status, tc.want, g)
		}
		var said bool
		for _, c := range s.Hosts[0].Models[0].Comparisons {
			said = said || strings.Contains(c.Values[2].Reason, tc.words)
		}
		if !said {
			t.Errorf("%s: no comparison of gpu 2 says %q: %+v", tc.name, tc.words, s.Hosts[0].Models[0].Comparisons)
		}
		if tc.want == results.StatusInconclusive && s.Hosts[0].Layers[results.LayerHost] != results.StatusInconclusive {
			t.Errorf("%s: the host layer is %q, want inconclusive (layers %v)", tc.name, s.Hosts[0].Layers[results.LayerHost], s.Hosts[0].Layers)
		}
	}
}

// A tail gate breached by an engine the host's CPUs starved (a wait at least the tail's 5 %) is left
// undecided on the host's account, not failed on the GPU's; with a shorter wait it fails.
func TestApplyGateOfAStarvedEngine(t *testing.T) {
	slow := healthy()
	slow.syncITL = 60 // past the 50 ms ITL p95 gate
	for _, tc := range []struct {
		wait float64
		want string
	}{{40, ResultInconclusive}, {5, ResultInconclusive}, {3, ResultFail}} {
		s := summary(slow)
		for j := range s.Hosts[0].Models[0].Endpoints[0].Load.Runs {
			s.Hosts[0].Models[0].Endpoints[0].Load.Runs[j].EngineCPUWaitPct = fp(tc.wait)
		}
		Apply(s, DefaultConfig())
		v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], "gate.itl_p95")
		if v.Result != tc.want {
			t.Errorf("wait %.0f %%: ITL gate %s (%s), want %s", tc.wait, v.Result, v.Reason, tc.want)
		}
		if tc.want == ResultInconclusive && (!strings.Contains(v.Reason, "so that tail may be those waits alone") || s.Hosts[0].Layers[results.LayerHost] != results.StatusInconclusive) {
			t.Errorf("wait %.0f %%: %q, host layer %q", tc.wait, v.Reason, s.Hosts[0].Layers[results.LayerHost])
		}
	}
}

// Every per-request figure of the compared metrics carries its rung's window, so that a "needs more
// requests" against a baseline also says how long a load would give them (the concurrency run's TTFT
// p99 and the throughput figures once carried none).
func TestLLMMetricsCarryTheirWindow(t *testing.T) {
	d := results.Dist{Count: 10, P50: 10, P95: 20, P99: 30}
	l := &results.Load{SustainedReqS: 2, Runs: []results.Run{
		{Kind: RunSynchronous, Concurrency: 1, WindowSeconds: 12, Requests: results.RequestCounts{Successful: 10}, TTFT: d, ITL: d, TPOT: d},
		{Kind: RunConcurrency, Concurrency: 64, WindowSeconds: 12, Requests: results.RequestCounts{Successful: 10}, TTFT: d, OutputTokS: 100},
	}}
	for _, m := range LLMMetrics {
		f, ok := m.Get(l)
		if !ok || f.Samples == 0 {
			continue // not measured here, or not a per-request figure
		}
		if f.Window != 12 {
			t.Errorf("%s: window %v, want the rung's 12 s", m.Name, f.Window)
		}
	}
	if f, ok := LLMMetrics[len(LLMMetrics)-1].Get(l); !ok || f.Value != 30 {
		t.Fatalf("%s: %+v %v, want the concurrency run's TTFT p99 30", LLMMetrics[len(LLMMetrics)-1].Name, f, ok)
	}
}
