package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// findingsSummary is a judged run with findings of several layers: an engine that broke on gpu 1
// (the run failed, the GPU inconclusive), a GPU that failed its own check and asks for a reset,
// and a client-side check that could not decide.
func findingsSummary() *results.Summary {
	engine := results.Finding{Layer: results.LayerEngine, Status: results.StatusFailed, Host: "n1", GPUs: []int{1},
		Subject: "Qwen/Qwen3-8B on gpu 1", Check: "judge.engine_fault", Reason: "155 of 761 requests failed: stream cut", Action: results.ActionFixEngine}
	gpu := results.Finding{Layer: results.LayerGPU, Status: results.StatusFailed, Host: "n1", GPUs: []int{0},
		Subject: "gpu 0", Check: "health.xid", Reason: "Xid 79: fell off the bus", Action: results.ActionResetGPU}
	client := results.Finding{Layer: results.LayerClient, Status: results.StatusInconclusive, Host: "n1", GPUs: []int{2},
		Subject: "Qwen/Qwen3-8B on gpu 2", Check: "gate.sustained_req_s", Reason: "the load generator saturated first", Action: results.ActionRerun}
	layers := map[string]results.Status{results.LayerEngine: results.StatusFailed, results.LayerGPU: results.StatusFailed, results.LayerClient: results.StatusInconclusive}
	return &results.Summary{RunID: "r-findings", Status: results.StatusFailed, Complete: true,
		// The judge's order is not worst first: every surface sorts.
		Findings: []results.Finding{client, engine, gpu},
		Layers:   layers, Action: results.ActionResetGPU,
		Hosts: []results.Host{{Name: "n1", Status: results.StatusFailed, Layers: layers, Action: results.ActionResetGPU, HardwareStatus: results.StatusFailed,
			GPUs: []results.GPUVerdict{
				{Index: 0, Name: "NVIDIA H100", Status: results.StatusFailed, Health: results.StatusFailed, Action: results.ActionResetGPU},
				{Index: 1, Name: "NVIDIA H100", Status: results.StatusInconclusive, Serving: results.StatusFailed},
				{Index: 2, Name: "NVIDIA H100", Status: results.StatusInconclusive, Serving: results.StatusInconclusive},
			},
			Models: []results.Model{{Model: "Qwen/Qwen3-8B", Status: results.StatusFailed, Endpoints: []results.Endpoint{
				{GPUs: []int{1}, Status: results.StatusFailed, Flags: []results.Flag{{Scope: "endpoint", Subject: "Qwen/Qwen3-8B on gpu 1",
					Check: "judge.engine_fault", Reason: "155 of 761 requests failed: stream cut", Layer: results.LayerEngine, Action: results.ActionFixEngine, Fails: true}}},
			}}},
		}}}
}

// Every surface shows each finding with its layer, status and action, worst first.
func TestFindingsEverySurface(t *testing.T) {
	s := findingsSummary()
	want := []struct {
		check, layer, status, action string
	}{
		{"judge.engine_fault", "engine", "failed", "fix-engine"},
		{"health.xid", "gpu", "failed", "reset-gpu"},
		{"gate.sustained_req_s", "client", "inconclusive", "rerun"},
	}

	t.Run("html", func(t *testing.T) {
		out := render(t, s)
		sec, _, ok := strings.Cut(out[strings.Index(out, `<section id="findings">`)+1:], "</section>")
		if !ok || !strings.Contains(out, `<section id="findings">`) {
			t.Fatal("no Findings section")
		}
		if i, k := strings.Index(out, `id="findings"`), strings.Index(out, `id="kpis"`); i > k {
			t.Error("the Findings section comes after the headline cards")
		}
		last := -1
		for _, w := range want {
			row := fmt.Sprintf(`<td><code>%s</code></td><td>%s</td><td><span class="pill s-%s">%s</span></td><td title="%s">%s</td>`,
				w.check, w.layer, w.status, w.status, w.action, results.ActionWords[w.action])
			i := strings.Index(sec, row)
			if i < 0 {
				t.Errorf("no row %s", row)
				continue
			}
			if i < last {
				t.Errorf("%s is out of order (failed, flag, then inconclusive)", w.check)
			}
			last = i
		}
		if line := "Layers: <b>" + results.LayerLine(s.Layers) + "</b> · hardware: <b>reset the GPU</b>"; !strings.Contains(sec, line) {
			t.Errorf("no layer line %q in\n%s", line, sec)
		}
		if !strings.Contains(out, `gpu 0 failed</span> <span class="small">(reset the GPU)</span>`) {
			t.Error("gpu 0's verdict lacks its action")
		}
	})

	t.Run("junit", func(t *testing.T) {
		b, err := JUnit(s)
		if err != nil {
			t.Fatal(err)
		}
		doc := parseJUnit(t, b)
		cases := map[string]junitCase{}
		var order []string
		for _, su := range doc.Suites {
			for _, c := range su.Cases {
				cases[c.Classname+" "+c.Name] = c
				if su.Name == "gpuvet.findings" {
					order = append(order, c.Name)
				}
			}
		}
		if got := strings.Join(order, ","); got != "judge.engine_fault,health.xid,gate.sustained_req_s" {
			t.Errorf("finding cases %s, want worst first", got)
		}
		for _, w := range want {
			c, ok := cases["gpuvet.finding."+w.layer+" "+w.check]
			if !ok {
				t.Errorf("no case gpuvet.finding.%s %s", w.layer, w.check)
				continue
			}
			tag := fmt.Sprintf("%s %s · %s: [%s]", w.layer, w.status, results.ActionWords[w.action], w.check)
			switch w.status {
			case "failed", "flag":
				if c.Failure == nil || !strings.Contains(c.Failure.Message, tag) {
					t.Errorf("%s: want a failure saying %q, got %+v", w.check, tag, c.Failure)
				}
			case "inconclusive":
				if c.Skipped == nil || !strings.Contains(c.Skipped.Message, tag) || c.Failure != nil {
					t.Errorf("%s: want a skip saying %q, got %+v", w.check, tag, c)
				}
			}
		}
		// A flag judged by layer says its layer and action where its case fails.
		c := cases["gpuvet.model.n1.Qwen_Qwen3-8B.gpu1 judge.engine_fault"]
		if c.Failure == nil || !strings.HasPrefix(c.Failure.Message, "[engine · fix the engine or its configuration] ") {
			t.Errorf("the endpoint's flag case: %+v", c.Failure)
		}
		if c := cases["gpuvet.finding.gpu health.xid"]; c.Failure == nil || !strings.HasPrefix(c.Failure.Message, "gpu failed · reset the GPU: [health.xid] gpu 0: Xid 79") {
			t.Errorf("one host: the finding's line names no host, got %+v", c.Failure)
		}
		if g := cases["gpuvet.verdict.n1 gpu 0"]; g.Failure == nil || !strings.Contains(g.Failure.Message, "reset the GPU") {
			t.Errorf("gpu 0's verdict case lacks its action: %+v", g.Failure)
		}
		if g := cases["gpuvet.verdict.n1 gpu 1"]; g.Skipped == nil || g.Failure != nil {
			t.Errorf("gpu 1 (engine broke on it) should be inconclusive, got %+v", g)
		}
		if r := cases["gpuvet.run run.status"]; r.Failure == nil || !strings.Contains(r.Failure.Message, results.LayerLine(s.Layers)) {
			t.Errorf("the run's case lacks its layers: %+v", r.Failure)
		}
	})

	t.Run("ctrf", func(t *testing.T) {
		b, err := CTRF(s)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Results struct {
				Tests []ctrfTest
			}
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			found := false
			for _, tc := range doc.Results.Tests {
				if strings.Join(tc.Suite, "/") != "gpuvet/findings" || !strings.HasPrefix(tc.Name, w.check+" ") {
					continue
				}
				found = true
				wantStatus := map[string]string{"failed": "failed", "flag": "failed", "inconclusive": "other"}[w.status]
				if tc.Status != wantStatus || tc.Extra["layer"] != w.layer || tc.Extra["action"] != w.action || tc.Extra["status"] != w.status {
					t.Errorf("%s: status %s extra %v; want %s, layer %s, action %s", w.check, tc.Status, tc.Extra, wantStatus, w.layer, w.action)
				}
			}
			if !found {
				t.Errorf("no CTRF test for finding %s", w.check)
			}
		}
		for _, tc := range doc.Results.Tests {
			if strings.HasPrefix(tc.Name, "judge.engine_fault") && tc.Suite[1] == "n1" && (tc.Extra["layer"] != "engine" || tc.Extra["action"] != "fix-engine") {
				t.Errorf("the endpoint's flag test lacks its layer and action: %v", tc.Extra)
			}
			if tc.Name == "gpu 0" && tc.Extra["action"] != "reset-gpu" {
				t.Errorf("gpu 0's verdict test lacks its action: %v", tc.Extra)
			}
		}
	})

	t.Run("prometheus", func(t *testing.T) {
		b, err := Prometheus(s)
		if err != nil {
			t.Fatal(err)
		}
		fams := parseProm(t, b)
		for _, w := range want {
			gpu := map[string]string{"judge.engine_fault": "1", "health.xid": "0", "gate.sustained_req_s": "2"}[w.check]
			if v := gauge(t, fams, "gpuvet_finding", map[string]string{"host": "n1", "layer": w.layer, "check": w.check, "status": w.status, "action": w.action, "gpu": gpu}); v != 1 {
				t.Errorf("gpuvet_finding %s = %g", w.check, v)
			}
		}
		if n := len(fams["gpuvet_finding"].GetMetric()); n != len(s.Findings) {
			t.Errorf("%d finding series, want %d", n, len(s.Findings))
		}
		for l, v := range map[string]float64{"engine": 2, "gpu": 2, "client": 0.5} {
			if got := gauge(t, fams, "gpuvet_layer_status", map[string]string{"host": "n1", "layer": l}); got != v {
				t.Errorf("gpuvet_layer_status{layer=%q} = %g, want %g", l, got, v)
			}
		}
		if gauge(t, fams, "gpuvet_action", map[string]string{"host": "n1", "action": "reset-gpu"}) != 1 {
			t.Error("no host action")
		}
		if gauge(t, fams, "gpuvet_gpu_action", map[string]string{"host": "n1", "gpu": "0", "action": "reset-gpu"}) != 1 {
			t.Error("no gpu action")
		}
		if n := len(fams["gpuvet_gpu_action"].GetMetric()); n != 1 {
			t.Errorf("%d gpu action series, want 1 (gpu 0's)", n)
		}
		if gauge(t, fams, "gpuvet_run_layer_status", map[string]string{"layer": "engine"}) != 2 {
			t.Error("no run layer status")
		}
	})
}

// gpuvet_finding stays bounded, one series per distinct finding, and counts what it left out.
func TestPrometheusFindingsBounded(t *testing.T) {
	s := findingsSummary()
	for i := 0; i < 300; i++ {
		s.Findings = append(s.Findings, results.Finding{Layer: results.LayerGPU, Status: results.StatusFlag, Host: "n1", GPUs: []int{i},
			Subject: fmt.Sprintf("gpu %d", i), Check: "health.ecc", Reason: "remapped rows", Action: results.ActionDrainRMA})
	}
	s.Findings = append(s.Findings, s.Findings[0]) // a duplicate is one series
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	fams := parseProm(t, b)
	if n := len(fams["gpuvet_finding"].GetMetric()); n != maxFindingSeries {
		t.Errorf("%d finding series, want %d", n, maxFindingSeries)
	}
	if v := gauge(t, fams, "gpuvet_findings_omitted", nil); v != float64(len(s.Findings)-1-maxFindingSeries) {
		t.Errorf("omitted %g", v)
	}
}

// The headline cards credit no figure measured on a GPU the judge failed or flagged.
func TestKPIsSkipBadGPUs(t *testing.T) {
	s := findingsSummary()
	s.Hosts[0].Models[0].Endpoints = append(s.Hosts[0].Models[0].Endpoints,
		results.Endpoint{GPUs: []int{0}, Status: results.StatusOK, Load: &results.Load{PeakOutputTokS: 9999}},
		results.Endpoint{GPUs: []int{2}, Status: results.StatusOK, Load: &results.Load{PeakOutputTokS: 1234}})
	for _, k := range kpis(s) {
		if k.Label == "Peak output tok/s" && k.Value != num(1234) {
			t.Errorf("peak card %q (%s): want gpu 2's %s, not failed gpu 0's", k.Value, k.Note, num(1234))
		}
	}
}
