package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A GPU-to-GPU cell the judge left undecided (cell inconclusive, or the whole comparison low
// confidence or client-limited) makes that GPU inconclusive on every surface: JUnit must not pass
// its compare case, CTRF must call it "other" (ran, could not decide), the report marks the cell.
func TestUndecidedComparisonIsInconclusiveEverywhere(t *testing.T) {
	s := readSample(t)
	m := &s.Hosts[0].Models[0]
	c := &m.Comparisons[1] // ttft_p95_ms: nothing flagged
	c.Values[0].Inconclusive = true
	c.Values[0].Reason = "ttft_p95_ms looked 12 % worse: inconclusive, the intervals overlap"
	m.Comparisons[0].ClientLimited = true // output_tok_s_peak: gpu 1 is not flagged, but nothing was decided
	m.Comparisons[0].Note = "not decided: client-limited"

	doc := parseJUnit(t, mustJUnit(t, s))
	want := map[string]string{
		"gpuvet.model.gpu-node-01.Qwen_Qwen3-8B.gpu0 compare.ttft_p95_ms":       "intervals overlap",
		"gpuvet.model.gpu-node-01.Qwen_Qwen3-8B.gpu1 compare.output_tok_s_peak": "client-limited",
	}
	for _, su := range doc.Suites {
		for _, jc := range su.Cases {
			frag, ok := want[jc.Classname+" "+jc.Name]
			if !ok {
				continue
			}
			delete(want, jc.Classname+" "+jc.Name)
			if jc.Skipped == nil || !strings.Contains(jc.Skipped.Message, "inconclusive") || !strings.Contains(jc.Skipped.Message, frag) {
				t.Errorf("%s %s: want an inconclusive skip naming %q, got failure=%v skipped=%v", jc.Classname, jc.Name, frag, jc.Failure, jc.Skipped)
			}
		}
	}
	for k := range want {
		t.Errorf("no case %s", k)
	}

	b, err := CTRF(s)
	if err != nil {
		t.Fatal(err)
	}
	var cd struct {
		Results struct {
			Tests []struct{ Name, Status string }
		}
	}
	if err := json.Unmarshal(b, &cd); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cd.Results.Tests {
		if strings.HasPrefix(tc.Name, "compare.ttft_p95_ms ") && strings.Contains(tc.Name, "gpu 0") && tc.Status != "other" {
			t.Errorf("CTRF %s: %s, want other", tc.Name, tc.Status)
		}
	}

	out := render(t, s)
	if !strings.Contains(out, `class="r inconclusive" title="ttft_p95_ms looked 12 % worse: inconclusive, the intervals overlap"`) {
		t.Error("the report shows the undecided cell like a decided one")
	}
}

func mustJUnit(t *testing.T, s *results.Summary) []byte {
	t.Helper()
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
