package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func parseJUnit(t *testing.T, b []byte) junitSuites {
	t.Helper()
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JUnit is not well-formed XML: %v", err)
	}
	return doc
}

func failing(doc junitSuites) map[string]string {
	out := map[string]string{}
	for _, su := range doc.Suites {
		for _, c := range su.Cases {
			if c.Failure != nil {
				out[c.Classname+" "+c.Name] = c.Failure.Message
			}
		}
	}
	return out
}

func TestJUnitSample(t *testing.T) {
	s := readSample(t)
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteJUnit(s, path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	doc := parseJUnit(t, b)
	fails := failing(doc)
	want := map[string]string{ // case -> a fragment of its reason
		"gpuvet.health.gpu-node-01.gpu3 health.clock_events":                    "HW thermal slowdown",
		"gpuvet.health.gpu-node-01.gpu3 compare.sgemm_fp32":                     "below the best card",
		"gpuvet.health.gpu-node-01.gpu3 compare.gemm_bf16":                      "below the best card",
		"gpuvet.model.gpu-node-01.Qwen_Qwen3-8B.gpu3 gate.sustained_req_s":      "against 30",
		"gpuvet.model.gpu-node-01.Qwen_Qwen3-8B.gpu3 compare.output_tok_s_peak": "below the best card",
		"gpuvet.model.gpu-node-01.Qwen_Qwen3-8B.gpu1 functional.stream_done":    "[DONE]",
		"gpuvet.baseline.k8s.Qwen_Qwen3-8B_gpu_1 baseline.ttft_p95_ms":          "+14.2 %",
		"gpuvet.run run.status": "run flag", // the run's own verdict is a case: a flagged run is never all green
	}
	for k, frag := range want {
		msg, ok := fails[k]
		if !ok {
			t.Errorf("no failing case %q", k)
			continue
		}
		if !strings.Contains(msg, frag) {
			t.Errorf("%s: message %q lacks %q", k, msg, frag)
		}
	}
	for k := range fails {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected failing case %s: %s", k, fails[k])
		}
	}
	if doc.Failures != len(want) || doc.Tests < 150 {
		t.Errorf("totals: %d tests, %d failures; want ≥150 and %d", doc.Tests, doc.Failures, len(want))
	}
	// the unsaturated GPU's throughput gate is inconclusive: skipped, never a pass or a failure.
	var skippedGate bool
	for _, su := range doc.Suites {
		for _, c := range su.Cases {
			if strings.HasSuffix(c.Classname, ".gpu2") && c.Name == "gate.sustained_req_s" {
				skippedGate = c.Skipped != nil && strings.Contains(c.Skipped.Message, "inconclusive")
			}
		}
	}
	if !skippedGate {
		t.Error("gpu 2's inconclusive gate is not a skipped case")
	}
}

// Every flag in a summary appears as a failing case, even one no known check explains.
func TestJUnitEveryFlag(t *testing.T) {
	s := readSample(t)
	odd := results.Flag{Scope: "gpu", Subject: "gpu 0", Check: "health.new_rule_nobody_knows", Reason: "a new rule fired"}
	s.Hosts[0].Health.GPUs[0].Flags = append(s.Hosts[0].Health.GPUs[0].Flags, odd)
	runOnly := results.Flag{Scope: "run", Subject: "run", Check: "run.gpu_count", Reason: "expected 8 GPUs, found 4"}
	s.Flags = append(s.Flags, runOnly)
	s.Hosts[0].Models[0].Endpoints[0].Error = "engine exited with code 1"
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseJUnit(t, b)
	fails := failing(doc)
	if fails["gpuvet.health.gpu-node-01.gpu0 health.new_rule_nobody_knows"] != "a new rule fired" {
		t.Error("unknown GPU flag lost")
	}
	if fails["gpuvet.run run.gpu_count"] != "expected 8 GPUs, found 4" {
		t.Error("run flag lost")
	}
	if doc.Errors != 1 {
		t.Errorf("%d errors, want 1 (the endpoint that did not serve)", doc.Errors)
	}
}

func TestJUnitEscapes(t *testing.T) {
	s := readSample(t)
	ep := &s.Hosts[0].Models[0].Endpoints[3]
	ep.Verdicts[2].Reason = "bad ]]> <tag> & \"quote\" \x01 ctl"
	ep.Flags = nil // the verdict alone carries the reason now
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseJUnit(t, b)
	if !strings.Contains(failing(doc)["gpuvet.model.gpu-node-01.Qwen_Qwen3-8B.gpu3 gate.sustained_req_s"], "<tag> & \"quote\"") {
		t.Error("reason did not survive the round trip")
	}
}

// readSim reads the real output of `gpuvet run --sim --sim-straggler 3` (4 virtual H200s), kept in
// testdata so the report is tested against what the pipeline writes, not only against our sample.
func readSim(t testing.TB) *results.Summary {
	t.Helper()
	s, err := results.Read(filepath.Join("testdata", "sim-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The straggler of a real simulated run shows as failing cases; the healthy GPUs' health does not.
func TestJUnitSimStraggler(t *testing.T) {
	b, err := JUnit(readSim(t))
	if err != nil {
		t.Fatal(err)
	}
	fails := failing(parseJUnit(t, b))
	var straggler, healthyHealth int
	for k := range fails {
		switch {
		case strings.Contains(k, ".gpu3 "):
			straggler++
		case strings.HasPrefix(k, "gpuvet.health."):
			healthyHealth++
		}
	}
	if straggler == 0 {
		t.Errorf("no failing case for the straggler gpu 3: %v", fails)
	}
	if healthyHealth != 0 {
		t.Errorf("%d failing health cases on healthy GPUs: %v", healthyHealth, fails)
	}
}

// Two hosts raising the same flag on their own "gpu 3" both fail, each in its host's suite.
func TestJUnitMultiHostSameFlag(t *testing.T) {
	s := readSample(t)
	h2 := s.Hosts[0]
	h2.Name = "gpu-node-02"
	s.Hosts = append(s.Hosts, h2)
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	fails := failing(parseJUnit(t, b))
	for _, h := range []string{"gpu-node-01", "gpu-node-02"} {
		if _, ok := fails["gpuvet.model."+h+".Qwen_Qwen3-8B.gpu3 gate.sustained_req_s"]; !ok {
			t.Errorf("%s: straggler gate failure missing", h)
		}
	}
	if n := len(allFlags(s)); n != 2*len(allFlags(readSample(t)))-1 { // the baseline flag is the run's, once
		t.Errorf("%d flags in the verdict", n)
	}
}

// Health flags land on the case of their check: a PCIe bandwidth flag on the PCIe bench, not on GEMM.
func TestJUnitHealthAttribution(t *testing.T) {
	s := readSample(t)
	g := &s.Hosts[0].Health.GPUs[0]
	g.Flags = append(g.Flags,
		results.Flag{Scope: "gpu", Subject: "gpu 0", Check: "health.pcie_bandwidth", Reason: "pcie_h2d 6.1 GB/s < 8 GB/s"},
		results.Flag{Scope: "gpu", Subject: "gpu 0", Check: "health.pcie_width", Reason: "x8 of x16"},
		results.Flag{Scope: "gpu", Subject: "gpu 0", Check: "health.retired_pages", Reason: "pending retirement"})
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	fails := failing(parseJUnit(t, b))
	const c = "gpuvet.health.gpu-node-01.gpu0 "
	for name, want := range map[string]string{"bench.pcie_h2d": "6.1 GB/s", "health.pcie_width": "x8 of x16", "health.ecc": "pending retirement"} {
		if !strings.Contains(fails[c+name], want) {
			t.Errorf("%s: got %q, want the flag %q", name, fails[c+name], want)
		}
	}
	if _, ok := fails[c+"bench.sgemm_fp32"]; ok {
		t.Error("a PCIe flag failed the GEMM case")
	}
}
