package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpuvet/gpuvet/internal/results"
)

// ctrfSchema is the CTRF JSON schema of the reference implementation (testdata/README.md).
func ctrfSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "ctrf-schema-0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat() // date-time, uuid: as ctrf's own validator (ajv-formats) checks them
	if err := c.AddResource("ctrf-schema-0.0.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("ctrf-schema-0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validCTRF(t *testing.T, sch *jsonschema.Schema, b []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

// Every CTRF document gpuvet writes validates against the reference schema: one host, a fleet with a
// flagged node and a skipped one, a failed run with no host, a run that never started its clock.
func TestCTRFValidatesAgainstTheSchema(t *testing.T) {
	sch := ctrfSchema(t)
	one, err := results.Read(filepath.Join("testdata", "sim-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	fleet, _ := results.Read(filepath.Join("testdata", "sim-summary.json"))
	h2 := fleet.Hosts[0]
	h2.Name, h2.Error = "node-b", "run: engines not ready"
	fleet.Hosts[0].Name = "node-a"
	fleet.Hosts = append(fleet.Hosts, h2)
	fleet.Fleet = &results.Fleet{Skipped: []results.SkippedHost{{Name: "node-c", Reason: "no free GPU"}},
		Comparisons: []results.Compare{{Metric: "m sustained_req_s", Values: []results.CompareCell{{Host: "node-a", Value: 1}, {Host: "node-b", Value: 0.5, Flagged: true}}}}}
	failed := &results.Summary{RunID: "20260101T000000Z", Status: results.StatusFailed, Error: "no serving backend",
		StartedAt: time.Unix(1, 0), FinishedAt: time.Unix(2, 0)}
	for name, s := range map[string]*results.Summary{"one host": one, "fleet": fleet, "failed run": failed, "empty": {}} {
		b, err := CTRF(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := validCTRF(t, sch, b); err != nil {
			t.Errorf("%s: the CTRF document does not validate: %v\n%s", name, err, firstN(b, 1500))
		}
	}
}

// The schema test can fail: the shape gpuvet wrote before (suite a string, no reportFormat, its own
// keys in environment) is rejected, each for its reason.
func TestCTRFSchemaRejectsTheOldShape(t *testing.T) {
	sch := ctrfSchema(t)
	old := `{"results": {"tool": {"name": "gpuvet"}, "summary": {"tests": 1, "passed": 1, "failed": 0, "pending": 0, "skipped": 0, "other": 0, "start": 0, "stop": 0},
	  "tests": [{"name": "health gpu 0", "status": "passed", "duration": 0, "suite": "gpuvet.node-a"}], "environment": {"run_id": "x"}}}`
	err := validCTRF(t, sch, []byte(old))
	if err == nil {
		t.Fatal("the old shape validates")
	}
	for _, want := range []string{"reportFormat", "specVersion", "suite", "run_id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the schema's error does not name %s: %v", want, err)
		}
	}
}

func firstN(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// An inconclusive gate ran and could not decide: CTRF's "other", never "skipped" (which says it did
// not run) — and the document still validates.
func TestCTRFInconclusiveIsOther(t *testing.T) {
	s, err := results.Read(filepath.Join("testdata", "sim-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	ep := &s.Hosts[0].Models[0].Endpoints[0]
	if len(ep.Verdicts) == 0 {
		t.Fatal("the sample has no verdicts")
	}
	ep.Verdicts[0].Result = "inconclusive"
	b, err := CTRF(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := validCTRF(t, ctrfSchema(t), b); err != nil {
		t.Fatalf("does not validate: %v", err)
	}
	var doc struct {
		Results struct {
			Summary struct{ Other int }
			Tests   []struct{ Name, Status string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := ep.Verdicts[0].Check
	found := false
	for _, tc := range doc.Results.Tests {
		if strings.HasPrefix(tc.Name, want+" ") && tc.Status == "other" {
			found = true
		}
	}
	if !found || doc.Results.Summary.Other == 0 {
		t.Errorf("inconclusive %s: no test with status other (summary other=%d)", want, doc.Results.Summary.Other)
	}
}
