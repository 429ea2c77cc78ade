package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CTRF (Common Test Report Format, ctrf.io) is the JSON document aicr reports its checks in. gpuvet
// writes one test per gate verdict, per node and GPU (endpoint), one per node-to-node comparison
// cell, one per GPU's health, and one per host that failed, so a CTRF consumer sees the same
// checks as the JUnit file.

// CTRFFile is the standard name beside junit.xml.
const CTRFFile = "ctrf.json"

// The document follows the CTRF JSON schema of the reference implementation (npm ctrf 0.3.0,
// testdata/ctrf-schema-0.0.json; a test validates against it): reportFormat and specVersion are
// required, a test's suite is its hierarchy (an array), and environment holds only the schema's
// keys, gpuvet's own in its extra.
const (
	ctrfFormat      = "CTRF"
	ctrfSpecVersion = "0.0.0" // the spec version ctrf 0.3.0 writes and validates
)

type ctrfDoc struct {
	ReportFormat string      `json:"reportFormat"`
	SpecVersion  string      `json:"specVersion"`
	RunID        string      `json:"runId,omitempty"`
	Timestamp    string      `json:"timestamp,omitempty"`
	GeneratedBy  string      `json:"generatedBy"`
	Results      ctrfResults `json:"results"`
}

type ctrfResults struct {
	Tool        ctrfTool        `json:"tool"`
	Summary     ctrfSummary     `json:"summary"`
	Tests       []ctrfTest      `json:"tests"`
	Environment ctrfEnvironment `json:"environment"`
}

type ctrfEnvironment struct {
	ReportName      string         `json:"reportName,omitempty"`
	AppName         string         `json:"appName,omitempty"`
	AppVersion      string         `json:"appVersion,omitempty"`
	TestEnvironment string         `json:"testEnvironment,omitempty"`
	Healthy         bool           `json:"healthy"`
	Extra           map[string]any `json:"extra,omitempty"`
}

type ctrfTool struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

type ctrfSummary struct {
	Tests   int   `json:"tests"`
	Passed  int   `json:"passed"`
	Failed  int   `json:"failed"`
	Pending int   `json:"pending"`
	Skipped int   `json:"skipped"`
	Other   int   `json:"other"`
	Start   int64 `json:"start"`
	Stop    int64 `json:"stop"`
	Suites  int   `json:"suites"`
}

type ctrfTest struct {
	Name     string         `json:"name"`
	Status   string         `json:"status"` // passed, failed, skipped, pending, other
	Duration int64          `json:"duration"`
	Message  string         `json:"message,omitempty"`
	Suite    []string       `json:"suite,omitempty"` // gpuvet, then the node (or fleet, run)
	Extra    map[string]any `json:"extra,omitempty"`
}

// CTRF builds the CTRF document of s.
func CTRF(s *results.Summary) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("ctrf: no summary")
	}
	r := ctrfResults{Tool: ctrfTool{Name: "gpuvet", Version: s.Tool.Version},
		Environment: ctrfEnvironment{ReportName: "gpuvet run " + s.RunID, AppName: "gpuvet", AppVersion: s.Tool.Version,
			TestEnvironment: s.Environment, Healthy: s.Status == results.StatusOK,
			Extra: map[string]any{"run_id": s.RunID, "backend": s.Backend, "status": string(s.Status)}}}
	if len(s.Layers) > 0 {
		r.Environment.Extra["layers"] = layerMap(s.Layers)
	}
	if s.Action != "" {
		r.Environment.Extra["action"] = s.Action
	}
	if !s.StartedAt.IsZero() {
		r.Summary.Start = s.StartedAt.UnixMilli()
	}
	if !s.FinishedAt.IsZero() {
		r.Summary.Stop = s.FinishedAt.UnixMilli()
	}
	// The tests are junit.xml's, one for one: both files count the same checks.
	for _, su := range junitDoc(s).Suites {
		suite := []string{"gpuvet", "run"}
		switch {
		case su.Hostname != "":
			suite = []string{"gpuvet", su.Hostname}
		case su.Name == "gpuvet.fleet":
			suite = fleetSuiteName
		case su.Name == "gpuvet.findings":
			suite = []string{"gpuvet", "findings"}
		}
		for _, c := range su.Cases {
			r.Tests = append(r.Tests, ctrfCase(c, suite))
		}
	}
	suites := map[string]bool{}
	for _, t := range r.Tests {
		suites[strings.Join(t.Suite, "\x00")] = true
		r.Summary.Tests++
		switch t.Status {
		case "passed":
			r.Summary.Passed++
		case "failed":
			r.Summary.Failed++
		case "skipped":
			r.Summary.Skipped++
		default:
			r.Summary.Other++
		}
	}
	r.Summary.Suites = len(suites)
	if r.Tests == nil {
		r.Tests = []ctrfTest{}
	}
	doc := ctrfDoc{ReportFormat: ctrfFormat, SpecVersion: ctrfSpecVersion, RunID: s.RunID, GeneratedBy: strings.TrimSpace("gpuvet " + s.Tool.Version), Results: r}
	if !s.FinishedAt.IsZero() {
		doc.Timestamp = s.FinishedAt.UTC().Format(time.RFC3339)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ctrfCase is one JUnit case as a CTRF test: a failure or an error fails, a check that ran and
// could not decide is "other" (neither a pass nor a skip), a check not run is skipped.
func ctrfCase(c junitCase, suite []string) ctrfTest {
	t := ctrfTest{Name: c.Name, Suite: suite, Status: "passed", Extra: c.Extra, Message: c.SystemOut}
	if c.Subject != "" {
		t.Name += " " + c.Subject
	}
	switch {
	case c.Failure != nil:
		t.Status, t.Message = "failed", c.Failure.Message
	case c.Error != nil:
		t.Status, t.Message = "failed", c.Error.Message
	case c.Skipped != nil && c.Inconclusive:
		t.Status, t.Message = "other", c.Skipped.Message
	case c.Skipped != nil:
		t.Status, t.Message = "skipped", c.Skipped.Message
	}
	return t
}

var fleetSuiteName = []string{"gpuvet", "fleet"}

// WriteCTRF writes the CTRF JSON of s to path.
func WriteCTRF(s *results.Summary, path string) error { return writeFile(CTRF, s, path) }
