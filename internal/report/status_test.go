package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The badge never reads a green PASS beside a headline that says "that is not a pass", and an
// inconclusive run has a badge of its own.
func TestBadgeIsNoPassWhenNotAPass(t *testing.T) {
	skipped := &results.Summary{Status: results.StatusOK, Complete: true, Hosts: []results.Host{{Name: "h",
		Health: &results.Health{Status: results.StatusOK, DCGM: &results.DCGM{Status: results.StatusSkipped, Note: "no dcgmi"}}}}}
	p := buildPage(skipped)
	if !strings.Contains(p.Headline, "not a pass") || p.StatusWord == "PASS" || p.Status == "ok" {
		t.Errorf("ok with a skipped check: badge %q (class %q) beside %q", p.StatusWord, p.Status, p.Headline)
	}
	inc := &results.Summary{Status: results.StatusInconclusive, Complete: true, Hosts: []results.Host{{Name: "h"}}}
	p = buildPage(inc)
	if p.StatusWord != "UNDECIDED" || p.Status != "inconclusive" || !strings.Contains(p.Headline, "not a pass") {
		t.Errorf("inconclusive: badge %q (class %q), headline %q", p.StatusWord, p.Status, p.Headline)
	}
	ok := &results.Summary{Status: results.StatusOK, Complete: true, Hosts: []results.Host{{Name: "h"}}}
	if p = buildPage(ok); p.StatusWord != "PASS" {
		t.Errorf("a plain ok: badge %q, want PASS", p.StatusWord)
	}
}
