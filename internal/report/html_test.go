package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func readSample(t *testing.T) *results.Summary {
	t.Helper()
	s, err := results.Read(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatalf("%v (regenerate with: go test ./internal/report -run TestSampleSummary -update)", err)
	}
	return s
}

func render(t *testing.T, s *results.Summary) string {
	t.Helper()
	var b bytes.Buffer
	if err := RenderHTML(s, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHTMLContent checks the report says what the summary says, in the order the issue asks.
func TestHTMLContent(t *testing.T) {
	s := readSample(t)
	out := render(t, s)
	if dir := os.Getenv("GPUVET_REPORT_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "report.html"), []byte(out), 0o644)
	}
	order := []string{`id="verdict"`, ">WARN<", "What to do", `id="kpis"`, "Peak output tok/s", `id="platform"`, "GPU health",
		"Measured vs datasheet", "Qwen/Qwen3-8B", "Output tok/s vs achieved req/s", "TTFT p95 vs achieved req/s",
		"Power during the load", "Functional API suite", "GPU-to-GPU", `id="baseline"`, `id="caveats"`, `id="legend"`}
	pos := 0
	for _, want := range order {
		i := strings.Index(out[pos:], want)
		if i < 0 {
			t.Fatalf("%q missing or out of order (after byte %d)", want, pos)
		}
		pos += i
	}
	for _, f := range allFlags(s) {
		if !strings.Contains(out, template_escape(f.Reason)) {
			t.Errorf("flag reason not shown: %s", f.Reason)
		}
	}
	for _, want := range []string{"(ref)", "inconclusive *", "≥ ", "SLO 60 ms (ref)", "stream_done", "k8s (overhead)", "vm (overhead)",
		"580.159.04", "vllm 0.17.1", "4 × NVIDIA H200", "sweep, chat API, 512 prompt / 256 output tokens", "tolerance 10 %"} {
		if !strings.Contains(out, template_escape(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(out, `<svg class="chart"`); n != 5 {
		t.Errorf("%d charts, want 5 (burn power, throughput, TTFT, load power, overhead)", n)
	}
	for _, bad := range []string{"http://", "https://", "<script", "@import", "url("} {
		// the only URLs allowed are the SVG namespace and the endpoints' own (printed as text).
		for _, m := range regexp.MustCompile(regexp.QuoteMeta(bad)+`[^"<\s]*`).FindAllString(out, -1) {
			if m != "http://www.w3.org/2000/svg" && !strings.HasPrefix(m, "http://127.0.0.1") {
				t.Errorf("report references %q: it must be self-contained", m)
			}
		}
	}
}

func template_escape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;")
	return r.Replace(s)
}

// TestHTMLEscapes: names in a summary are outside input and must never become markup.
func TestHTMLEscapes(t *testing.T) {
	s := readSample(t)
	evil := `<script>alert(1)</script>"'&`
	s.Hosts[0].Name = evil
	s.Hosts[0].Models[0].Model = evil
	s.Meta.Models = []string{evil}
	s.Flags = append(s.Flags, results.Flag{Scope: "run", Subject: evil, Check: evil, Reason: evil})
	s.Baseline.Rows[0].Subject = evil
	out := render(t, s)
	if strings.Contains(out, "<script>") {
		t.Fatal("a name from the summary became a <script> element")
	}
	if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("escaped name not found")
	}
}

// TestHTMLLarge: 8 GPUs × 3 models × 2 environments stays readable: summary first, fine sections folded.
func TestHTMLLarge(t *testing.T) {
	s := buildSample(largeSample())
	out := render(t, s)
	if dir := os.Getenv("GPUVET_REPORT_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "large.html"), []byte(out), 0o644)
	}
	open := strings.Count(out, `<details class="sec" open>`) + strings.Count(out, `<details class="sec model" open>`)
	closed := strings.Count(out, `<details class="sec">`) + strings.Count(out, `<details class="sec model">`)
	if closed == 0 {
		t.Errorf("large run: no section folded (%d open)", open)
	}
	// every flagged model stays open: what needs attention is never hidden.
	for _, m := range s.Hosts[0].Models {
		i := strings.Index(out, "<h3>"+template_escape(m.Model)+" ")
		if i < 0 {
			t.Fatalf("model %s missing", m.Model)
		}
		head := out[strings.LastIndex(out[:i], "<details"):i]
		if (m.Status != results.StatusOK) != strings.Contains(head, " open") {
			t.Errorf("model %s status %s: open=%v", m.Model, m.Status, strings.Contains(head, " open"))
		}
	}
	if v := strings.Index(out, `id="verdict"`); v < 0 || v > strings.Index(out, "<details") {
		t.Error("the verdict must come before any section")
	}
}

// TestHTMLPartial: a failed, incomplete run with missing phases still renders and says so.
func TestHTMLPartial(t *testing.T) {
	s := &results.Summary{SchemaVersion: "1.0", RunID: "r1", Backend: "local", Status: results.StatusFailed, Error: "engine never served: port 8000 in use",
		Hosts: []results.Host{{Name: "h", Status: results.StatusFailed, Discovery: results.Discovery{Source: "nvml", Error: "NVML: driver not loaded"}}}}
	out := render(t, s)
	for _, want := range []string{">FAIL<", "engine never served", "NVML: driver not loaded", "Incomplete run", "did not finish"} {
		if !strings.Contains(out, want) {
			t.Errorf("partial report lacks %q", want)
		}
	}
	if strings.Contains(out, `class="chart"`) {
		t.Error("charts drawn without data")
	}
}

func TestWriteHTML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "report.html")
	if err := WriteHTML(readSample(t), path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) {
		t.Fatalf("report.html not written: %v", err)
	}
	if err := WriteHTML(nil, path); err == nil {
		t.Error("nil summary accepted")
	}
}
