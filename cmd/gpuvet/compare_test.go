package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// runJudgeCLI executes the CLI with args, capturing stdout.
func runJudgeCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := executeTo(args, &out, nil)
	return code, out.String()
}

func around(v float64) *results.Interval {
	return &results.Interval{Lo: v * 0.99, Hi: v * 1.01, Level: 0.95}
}

func writeSummary(t *testing.T, dir, name string, sustained, ttft float64, driver string) string {
	t.Helper()
	load := &results.Load{Config: results.LoadConfig{Profile: "sweep"}, SustainedReqS: sustained, PeakOutputTokS: sustained * 256,
		Runs: []results.Run{{Kind: "synchronous", Requests: results.RequestCounts{Successful: 400},
			TTFT: results.Dist{Count: 400, P95: ttft}, ITL: results.Dist{Count: 4000, P95: 8}, TPOT: results.Dist{Count: 400, P95: 8},
			OutputTokS: sustained * 256, CI: &results.Intervals{ // ±1 %: every judged figure carries its interval
				TTFTP95: around(ttft), ITLP95: around(8), TPOTP95: around(8), OutputTokS: around(sustained * 256)}}}}
	s := &results.Summary{SchemaVersion: results.SchemaVersion, Status: results.StatusOK, Environment: strings.TrimSuffix(name, ".json"), Meta: results.Meta{DriverVersion: driver},
		Hosts: []results.Host{{Name: "n", Models: []results.Model{{Model: "Qwen/Qwen3-8B",
			Endpoints: []results.Endpoint{{GPUs: []int{0}, GPUName: "NVIDIA H200", Load: load}}}}}}}
	p := filepath.Join(dir, name)
	if err := results.WriteJSON(p, s); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	base := writeSummary(t, dir, "baremetal.json", 40, 40, "570.86.15")
	vm := writeSummary(t, dir, "vm.json", 34, 42, "580.65.06")
	k8s := writeSummary(t, dir, "k8s.json", 39, 41, "570.86.15")
	corrupt := filepath.Join(dir, "corrupt.json")
	os.WriteFile(corrupt, []byte(`{"schema_version": "1.0", "hosts": [`), 0o644)
	vllm := filepath.Join("testdata", "vllm-bench-mock-ttft50-itl10.json")

	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"two environments", []string{"compare", base, vm, k8s}, 0, []string{"VM", "K8S", "sustained_req_s", "+15.0 %", "breach",
			"caveat: vm: driver version differs (baseline 570.86.15, vm 580.65.06)", "FLAG Qwen/Qwen3-8B gpu 0 [vm]"}},
		{"fail on flag", []string{"compare", "--fail-on-flag", base, vm}, 1, []string{"breach"}},
		{"tolerance flag", []string{"compare", "--tolerance", "20", base, vm}, 0, []string{"tolerance 20 %, flag", "ok"}},
		{"tolerance from --set", []string{"compare", "--set", "compare.baseline_tolerance_pct=16", base, vm}, 0, []string{"tolerance 16 %, flag"}},
		{"bad tolerance", []string{"compare", "--tolerance", "-3", base, vm}, 2, nil},
		{"corrupt baseline degrades", []string{"compare", corrupt, vm}, 0, []string{"no comparison: baseline", "unreadable"}},
		{"missing baseline degrades", []string{"compare", filepath.Join(dir, "none.json"), vm}, 0, []string{"no comparison"}},
		{"missing baseline fails on flag", []string{"compare", "--fail-on-flag", filepath.Join(dir, "none.json"), vm}, 1, []string{"no comparison"}},
		{"corrupt baseline fails on flag", []string{"compare", "--fail-on-flag", corrupt, vm}, 1, []string{"no comparison"}},
		{"missing result is bad input", []string{"compare", base, filepath.Join(dir, "none.json")}, 2, nil},
		{"inputs named by path", []string{"compare", base, vm}, 0, []string{"vm: " + vm}},
		{"vLLM bench as baseline", []string{"compare", vllm, vllm}, 0, []string{"mock gpu 0", "ttft_p99_concurrency_ms", "concurrency_output_tok_s", "+0.0 %"}},
		{"json", []string{"compare", "--json", base, vm}, 0, []string{`"overhead_pct"`, `"tolerance_pct": 10`}},
		{"one argument", []string{"compare", base}, 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runJudgeCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestCalibrateCommand(t *testing.T) {
	dir := t.TempDir()
	r1 := writeSummary(t, dir, "r1.json", 40, 40, "")
	r2 := writeSummary(t, dir, "r2.json", 36, 50, "")
	code, out := runJudgeCLI(t, "calibrate", r1, r2)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, w := range []string{"reference:", "'NVIDIA H200':", "'Qwen/Qwen3-8B':", "ttft_p95_ms: 65", "min_throughput_req_s: 27"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if code, out = runJudgeCLI(t, "calibrate", "--itl", r1, r2); code != 0 || !strings.Contains(out, "itl_p95_ms: 11") {
		t.Errorf("--itl: exit %d\n%s", code, out)
	}
	if code, _ = runJudgeCLI(t, "calibrate", filepath.Join(dir, "none.json")); code != 2 {
		t.Errorf("missing run: exit %d, want 2", code)
	}
	// Issue 42: a run that is not ok is refused (exit 2, before anything is printed) unless --gpus
	// names the GPUs to learn from.
	s, _ := results.Read(r2)
	s.Status = results.StatusFlag
	s.Hosts[0].GPUs = []results.GPUVerdict{{Index: 0, Status: results.StatusOK}, {Index: 1, Status: results.StatusFlag, Checks: []string{"compare.gpu_to_gpu"}}}
	flagged := filepath.Join(dir, "flag.json")
	if err := results.WriteJSON(flagged, s); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code = executeTo([]string{"calibrate", r1, flagged}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "its status is flag, not ok (gpu 1 flag); its ok GPUs are 0") || stdout.Len() > 0 {
		t.Errorf("a flagged run: exit %d, want 2 and the refusal:\n%s%s", code, stdout.String(), stderr.String())
	}
	if code, out = runJudgeCLI(t, "calibrate", "--gpus", "0", r1, flagged); code != 0 || !strings.Contains(out, "reference:") {
		t.Errorf("--gpus 0: exit %d\n%s", code, out)
	}
	// Issue 51: following the advice with a GPU the run lacks, or only a flagged one, learned
	// nothing and printed empty tables with exit 0.
	stdout.Reset()
	stderr.Reset()
	if code = executeTo([]string{"calibrate", "--gpus", "7", flagged}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "has no GPU 7 (its GPUs: 0, 1)") {
		t.Errorf("--gpus 7: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code = executeTo([]string{"calibrate", "--gpus", "1", flagged}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "learned nothing") ||
		!strings.Contains(stdout.String(), "gpu 0 left out: not among the GPUs named") {
		t.Errorf("--gpus 1 (the flagged GPU only): exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}
