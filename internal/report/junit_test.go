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
