package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func readSample(t testing.TB) *results.Summary {
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
		"580.159.04", "vllm 0.17.1", "1 breach in 32 comparisons; worst: Qwen/Qwen3-8B gpu 1 ttft_p95_ms in k8s", "4 × NVIDIA H200", "sweep, chat API, 512 prompt / 256 output tokens", "tolerance 10 %"} {
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
	// the straggler flags every model; make the second one clean so there is something to fold.
	m := &s.Hosts[0].Models[1]
	m.Status, m.Flags = results.StatusOK, nil
	for i := range m.Endpoints {
		m.Endpoints[i].Status, m.Endpoints[i].Flags = results.StatusOK, nil
	}
	out := render(t, s)
	if dir := os.Getenv("GPUVET_REPORT_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "large.html"), []byte(out), 0o644)
	}
	tags := regexp.MustCompile(`<details class="sec model"[^>]*>`).FindAllString(out, -1)
	closed := 0
	for _, tag := range tags {
		if !strings.Contains(tag, " open") {
			closed++
		}
	}
	if closed == 0 {
		t.Errorf("large run: no section folded (%d sections)", len(tags))
	}
	// the overview lists every model and links to its section.
	for _, m := range s.Hosts[0].Models {
		a := anchor(s.Hosts[0].Name, m.Model)
		if !strings.Contains(out, `href="#`+a+`"`) || !strings.Contains(out, `id="`+a+`"`) {
			t.Errorf("overview link to %s missing", m.Model)
		}
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

// Many flags: the first ones stay in sight, the rest fold under the verdict, none is dropped.
func TestHTMLManyFlags(t *testing.T) {
	s := readSample(t)
	for i := 0; i < 20; i++ {
		s.Flags = append(s.Flags, results.Flag{Scope: "run", Subject: "x", Check: "extra", Reason: "extra flag " + strings.Repeat("i", i+1) + "."})
	}
	out := render(t, s)
	n := len(allFlags(s))
	if !strings.Contains(out, "Flags ("+itoa(n)+")") || !strings.Contains(out, itoa(n-maxVerdictFlags)+" more flags") {
		t.Errorf("want %d flags with %d folded", n, n-maxVerdictFlags)
	}
	for i := 0; i < 20; i++ {
		if !strings.Contains(out, "extra flag "+strings.Repeat("i", i+1)+".") {
			t.Errorf("flag %d dropped", i)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDir(readSample(t), dir, true, true, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{HTMLFile, JUnitFile, PrometheusFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// one output failing (its path is a directory) does not stop the others.
	dir2 := t.TempDir()
	os.Mkdir(filepath.Join(dir2, HTMLFile), 0o755)
	os.WriteFile(filepath.Join(dir2, HTMLFile, "x"), nil, 0o644)
	err := WriteDir(readSample(t), dir2, true, true, false)
	if err == nil {
		t.Error("writing over a directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir2, JUnitFile)); err != nil {
		t.Error("junit.xml not written after the HTML failed")
	}
}

// A failed endpoint shows its error, its log tail and its failed requests by class.
func TestHTMLEndpointFailure(t *testing.T) {
	s := readSample(t)
	ep := &s.Hosts[0].Models[0].Endpoints[1]
	ep.Status, ep.Error = results.StatusFailed, "engine exited with code 1 after 12 s"
	ep.LogTail = "torch.OutOfMemoryError: CUDA out of memory <tried 2.00 GiB>"
	ep.Load.Runs[3].Errors = map[string]int{"http_500": 3, "timeout": 1}
	s.Hosts[0].Health.GPUs[2].GPU.XIDs = []results.XIDEvent{{XID: 79}}
	out := render(t, s)
	for _, want := range []string{"engine exited with code 1 after 12 s", "CUDA out of memory &lt;tried 2.00 GiB&gt;", "4 of ", "http_500 3, timeout 1", "XID 79"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// Several hosts (ssh backend): each gets its section, KPIs count every GPU, JUnit suites stay apart.
func TestMultiHost(t *testing.T) {
	s := readSample(t)
	h2 := s.Hosts[0]
	h2.Name = "gpu-node-02"
	s.Hosts = append(s.Hosts, h2)
	out := render(t, s)
	if !strings.Contains(out, "Host gpu-node-01") || !strings.Contains(out, "Host gpu-node-02") {
		t.Error("a host section is missing")
	}
	if !strings.Contains(out, `<div class="kv">8</div>`) {
		t.Error("GPUs tested should count both hosts")
	}
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, su := range parseJUnit(t, b).Suites {
		if names[su.Name] {
			t.Errorf("suite %s twice", su.Name)
		}
		names[su.Name] = true
	}
}

// Whatever a phase failed to produce (nil loads, power, suites, health, an empty baseline), every
// output still renders and says what is missing instead of panicking.
func TestOutputsWithMissingPhases(t *testing.T) {
	s := readSample(t)
	h := &s.Hosts[0]
	for i := range h.Models[0].Endpoints {
		e := &h.Models[0].Endpoints[i]
		e.Load, e.Power, e.Functional, e.Verdicts = nil, nil, nil, nil
		e.Status, e.Error = results.StatusFailed, "engine never served"
	}
	h.Models[0].Comparisons = nil
	h.Health.DCGM = nil
	h.Health.GPUs[1].Burn = nil
	h.Health.GPUs[2].Bench = nil
	s.Meta.LoadProfile = nil
	s.Baseline = &results.BaselineComparison{Note: "no comparison: baseline unreadable (unexpected EOF)"}
	out := render(t, s)
	for _, want := range []string{"engine never served", "no comparison: baseline unreadable"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if _, err := JUnit(s); err != nil {
		t.Error(err)
	}
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	parseProm(t, b)
	s.Hosts[0].Health = nil
	s.Hosts[0].Models = nil
	render(t, s)
	if _, err := JUnit(s); err != nil {
		t.Error(err)
	}
}

// The real output of `gpuvet run --sim --sim-straggler 3 --baseline` (against a healthy simulated
// run): the baseline section shows the judge's rows, notes and breaches.
func TestHTMLRealBaseline(t *testing.T) {
	s, err := results.Read(filepath.Join("testdata", "sim-baseline-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, s)
	if !strings.Contains(out, "breaches in 44 comparisons") || !strings.Contains(out, "Worst overhead per metric") {
		t.Error("baseline summary or chart missing")
	}
	if !strings.Contains(out, "its throughput is a lower bound") {
		t.Error("the judge's per-environment note is not shown")
	}
}

// Issue 51: a plain Ctrl-C read "The run itself broke somewhere" and "Nothing was judged".
func TestHTMLInterrupted(t *testing.T) {
	s := readSample(t)
	s.Status, s.Complete = results.StatusInterrupted, false
	s.Error = "interrupted (interrupt signal received): stopped while running m on gpu 0; results are partial"
	out := render(t, s)
	for _, want := range []string{"The run was stopped before it finished", "The run was stopped (Ctrl-C or a signal) before it finished: run it again"} {
		if !strings.Contains(out, want) {
			t.Errorf("interrupted report lacks %q", want)
		}
	}
	for _, bad := range []string{"broke somewhere", "Nothing was judged", "context canceled"} {
		if strings.Contains(out, bad) {
			t.Errorf("interrupted report says %q", bad)
		}
	}
}

// Issue 51: "18 flags raised" hid that all 18 were one GPU's.
func TestHeadlineSaysWhatTheFlagsAreOn(t *testing.T) {
	p := &page{Flags: []flagView{{Subject: "gpu 2"}, {Subject: "gpu 2"}, {Subject: "gpu 2"}}, FlagCount: 3}
	if got := flagSubjects(p); got != ", all on gpu 2" {
		t.Errorf("one subject: %q", got)
	}
	p.MoreFlags = []flagView{{Subject: "gpu 0"}}
	p.FlagCount = 4
	if got := flagSubjects(p); got != " on 2 subjects (gpu 2; gpu 0)" {
		t.Errorf("two subjects: %q", got)
	}
}

// A GPU's health flags and its endpoint's serving flags have different subjects ("gpu 2 (GPU-…)",
// "Qwen/Qwen3-8B on gpu 2"): the headline still says they are all on gpu 2.
func TestHeadlineCountsAGPUsHealthAndServingFlagsAsOne(t *testing.T) {
	s := &results.Summary{Hosts: []results.Host{{Name: "h",
		Health: &results.Health{GPUs: []results.GPUHealth{{GPU: results.GPUInfo{Index: 2},
			Flags: []results.Flag{{Scope: "gpu", Subject: "gpu 2 (GPU-e032bf84)", Check: "health.gemm"}}}}},
		Models: []results.Model{{Model: "Qwen/Qwen3-8B", Endpoints: []results.Endpoint{{GPUs: []int{2},
			Flags: []results.Flag{{Scope: "model", Subject: "Qwen/Qwen3-8B on gpu 2", Check: "compare.gpu_to_gpu"},
				{Scope: "model", Subject: "Qwen/Qwen3-8B on gpu 2", Check: "gate.itl_p95"}}}}}}}}}
	p := &page{Flags: allFlags(s), FlagCount: 3}
	if got := flagSubjects(p); got != ", all on gpu 2" {
		t.Errorf("3 flags of gpu 2 read %q", got)
	}
}

// The TTFT chart's SLO line comes from meta.thresholds when no endpoint has a TTFT verdict (a
// summary judged before its gates, or one with the gate off on every endpoint but the global one).
func TestTTFTSLOFromMetaThresholds(t *testing.T) {
	v := 150.0
	s := &results.Summary{Meta: results.Meta{Thresholds: map[string]results.Threshold{results.ThresholdOf(results.ThTTFTP95Ms).Summary: {Value: &v, Unit: "ms"}}}}
	if l := ttftSLO(s, results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{0}}}}); l == nil || l.Y != 150 {
		t.Fatalf("SLO line %+v, want 150 ms from meta.thresholds", l)
	}
}

// An XID marks the events cell bad, whatever the clock-event mask says (the mask's check once
// overwrote it).
func TestInventoryRowXIDIsBad(t *testing.T) {
	var g results.GPUHealth
	g.GPU.XIDs = []results.XIDEvent{{XID: 79}}
	if r := inventoryRow(g); !r.EventsBad || r.Events != "XID 79" {
		t.Fatalf("XID 79, no clock event: events %q, bad %v", r.Events, r.EventsBad)
	}
	g.GPU.XIDs = nil
	if r := inventoryRow(g); r.EventsBad {
		t.Fatalf("no XID, no clock event: bad %v", r.EventsBad)
	}
	g.GPU.ClockEvents.Mask = 0x40
	if r := inventoryRow(g); !r.EventsBad {
		t.Fatal("HW thermal slowdown: not bad")
	}
}

// A killed run leaves status "incomplete": the headline says the run did not finish, never that
// nothing was judged.
func TestHTMLIncompleteHeadline(t *testing.T) {
	s := readSample(t)
	s.Status, s.Complete = results.StatusIncomplete, false
	out := render(t, s)
	if strings.Contains(out, "Nothing was judged") || !strings.Contains(out, "The run did not finish") {
		t.Errorf("incomplete run's headline: %q", between(out, "<h1>", "</h1>"))
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	in, _, _ := strings.Cut(rest, b)
	return in
}
