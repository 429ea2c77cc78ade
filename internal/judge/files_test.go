package judge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

func TestBaselineForInline(t *testing.T) {
	base := "baseline.json"
	s := withEnv(summary(healthy(), healthy().scaled(0.25)), "k8s")
	cfg := DefaultConfig()
	BaselineFor(summary(healthy(), healthy()), "", base, s, cfg)
	Apply(s, cfg)
	if s.Baseline == nil || s.Baseline.BaselineFile != base || s.Baseline.TolerancePctSrc != SourceDefault {
		t.Fatalf("baseline %+v", s.Baseline)
	}
	var buf bytes.Buffer
	if err := term.Baseline(&buf, s.Baseline, BaselineFlags(s.Baseline)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "FLAG Qwen/Qwen3-8B gpu 1 [k8s]") {
		t.Errorf("table:\n%s", buf.String())
	}
	// A corrupt baseline: a note, no flag, the run still judged.
	s2 := summary(healthy(), healthy())
	BaselineFor(nil, "no comparison: baseline missing.json unreadable (no such file)", "missing.json", s2, cfg)
	Apply(s2, cfg)
	if s2.Baseline == nil || !strings.HasPrefix(s2.Baseline.Note, "no comparison") || s2.Status != results.StatusOK {
		t.Errorf("missing baseline: %+v status %s", s2.Baseline, s2.Status)
	}
}
