package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleSummary = "../../internal/report/testdata/summary.json"

func TestReportCmd(t *testing.T) {
	dir := t.TempDir()
	html, junit, prom := filepath.Join(dir, "r.html"), filepath.Join(dir, "j.xml"), filepath.Join(dir, "g.prom")
	if code := execute([]string{"report", sampleSummary, "--html", html, "--junit", junit, "--prom", prom}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, p := range []string{html, junit, prom} {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			t.Errorf("%s not written: %v", p, err)
		}
	}
}

func TestReportCmdDefaultsToHTMLBesideSummary(t *testing.T) {
	dir := t.TempDir()
	b, _ := os.ReadFile(sampleSummary)
	sum := filepath.Join(dir, "summary.json")
	os.WriteFile(sum, b, 0o644)
	if code := execute([]string{"report", sum}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Error(err)
	}
}

func TestReportCmdBadInput(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "x.json")
	os.WriteFile(notJSON, []byte("{not json"), 0o644)
	for _, args := range [][]string{
		{"report"},
		{"report", filepath.Join(dir, "missing.json")},
		{"report", notJSON},
		{"report", sampleSummary, "--nope"},
		{"report", sampleSummary, "--html", filepath.Join(dir, "x.out"), "--junit", filepath.Join(dir, ".", "x.out")}, // one file, two formats
	} {
		if code := execute(args); code != exitBadUsage {
			t.Errorf("%s: exit %d, want %d", strings.Join(args, " "), code, exitBadUsage)
		}
	}
}

func TestReportCmdPDFWithoutChromium(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("GPUVET_CHROMIUM", "")
	html := filepath.Join(dir, "r.html")
	if code := execute([]string{"report", sampleSummary, "--html", html, "--pdf", filepath.Join(dir, "r.pdf")}); code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	if _, err := os.Stat(html); err != nil {
		t.Error("the HTML must be written even when the PDF cannot be")
	}
}
