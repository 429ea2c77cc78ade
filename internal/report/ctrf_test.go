package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The CTRF document has one test per gate verdict per node and GPU, per node-to-node cell, per GPU's
// health and per skipped node, with counts that add up.
func TestCTRF(t *testing.T) {
	s, err := results.Read(filepath.Join("testdata", "sim-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Two nodes: the sample host twice, the second flagged node to node, plus a skipped node.
	h2 := s.Hosts[0]
	h2.Name = "node-b"
	s.Hosts[0].Name = "node-a"
	s.Hosts = append(s.Hosts, h2)
	s.Fleet = &results.Fleet{Skipped: []results.SkippedHost{{Name: "node-c", Reason: "no free GPU"}},
		Comparisons: []results.Compare{{Metric: "Qwen/Qwen3-8B sustained_req_s", HigherIsBetter: true, VariancePct: 20, Values: []results.CompareCell{
			{Host: "node-a", Value: 40, Reason: "best"}, {Host: "node-b", Value: 20, DeltaPct: 50, Flagged: true, Reason: "50 % below"}}}}}
	b, err := CTRF(s)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results struct {
			Tool    struct{ Name string }
			Summary struct{ Tests, Passed, Failed, Skipped, Other int }
			Tests   []struct {
				Name, Status string
				Suite        []string
				Extra        map[string]any
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	r := doc.Results
	if r.Tool.Name != "gpuvet" || r.Summary.Tests != len(r.Tests) || r.Summary.Passed+r.Summary.Failed+r.Summary.Skipped+r.Summary.Other != r.Summary.Tests {
		t.Errorf("summary %+v for %d tests", r.Summary, len(r.Tests))
	}
	verdicts := 0
	for _, m := range s.Hosts[0].Models {
		for _, ep := range m.Endpoints {
			verdicts += len(ep.Verdicts)
		}
	}
	gates := map[string]int{}
	var nodeFlag, skipped bool
	for _, tc := range r.Tests {
		switch {
		case strings.HasPrefix(tc.Name, "gate."):
			gates[tc.Extra["node"].(string)]++
			if !strings.Contains(tc.Name, " gpu") || tc.Extra["gpus"] == nil {
				t.Errorf("gate test %q does not name its GPU", tc.Name)
			}
		case tc.Name == "compare.node_to_node Qwen/Qwen3-8B sustained_req_s node node-b":
			nodeFlag = tc.Status == "failed"
		case tc.Name == "node node-c":
			skipped = tc.Status == "skipped"
		}
	}
	if verdicts == 0 || gates["node-a"] != verdicts || gates["node-b"] != verdicts {
		t.Errorf("gate tests per node %v, want %d each", gates, verdicts)
	}
	if !nodeFlag || !skipped {
		t.Errorf("node-to-node flag %v, skipped node %v", nodeFlag, skipped)
	}
	// The HTML report has the fleet's own section: node columns, the skipped node.
	var html bytes.Buffer
	if err := RenderHTML(s, &html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Node to node", "<th>node-b</th>", "<b>node-c</b>: no free GPU"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}
