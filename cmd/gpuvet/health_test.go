package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// runCLI runs gpuvet with args and returns the exit code and stdout (and stderr).
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := executeTo(args, &out, &errb)
	return code, out.String() + errb.String()
}

func TestHealthFromXML(t *testing.T) {
	out := filepath.Join(t.TempDir(), "health.json")
	code, text := runCLI(t, "health", "--sim=false", "--nvidia-smi-xml", "testdata/h200-idle.xml", "--out", out, "--expect-gpus", "1")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	for _, want := range []string{"NVIDIA H200", "00000000:00:06.0", "gen5 x16 / gen5 x16", "gpu_idle (0x1)", "health status: OK"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var h results.Health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	if h.Source != "nvidia-smi-xml" || len(h.GPUs) != 1 || h.GPUs[0].GPU.Name != "NVIDIA H200" || h.Status != results.StatusOK {
		t.Errorf("json: %+v", h)
	}
	// The count check flags; --fail-on-flag turns it into exit 1.
	code, text = runCLI(t, "health", "--nvidia-smi-xml", "testdata/h200-idle.xml", "--out", "", "--expect-gpus", "2", "--fail-on-flag")
	if code != 1 || !strings.Contains(text, "found 1 GPU(s), expected 2") {
		t.Errorf("exit %d:\n%s", code, text)
	}
	runCLI(t, "health", "--nvidia-smi-xml", "", "--expect-gpus", "0", "--fail-on-flag=false")
}

func TestHealthBadInput(t *testing.T) {
	cases := [][]string{
		{"health", "--nvidia-smi-xml", "testdata/missing.xml"},
		{"health", "--nvidia-smi-xml", "", "--dcgm-level", "9"},
		{"health", "--dcgm-level", "2", "--expect-pcie-width", "3"},
		{"health", "--expect-pcie-width", "0", "--burn", "soon"},
	}
	for _, args := range cases {
		if code, text := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, text)
		}
	}
}

func TestHealthNoDriver(t *testing.T) {
	if src, err := gpu.OpenNVML(); err == nil {
		src.Close()
		t.Skip("an NVIDIA driver is present")
	}
	if code, text := runCLI(t, "health", "--nvidia-smi-xml", "", "--sim=false"); code != 2 {
		t.Errorf("exit %d, want 2:\n%s", code, text)
	}
	_, _, err := openHealthSource(&healthOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "no NVIDIA driver found (libnvidia-ml.so.1 not loadable)") {
		t.Errorf("err = %v", err)
	}
}

func TestHealthSim(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sim.json")
	code, text := runCLI(t, "health", "--nvidia-smi-xml", "", "--sim", "--sim-gpus", "2", "--sim-straggler", "-1", "--burn", "0s", "--out", out, "--expect-gpus", "2", "--fail-on-flag")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	for _, want := range []string{"source: sim", "sgemm_fp32", "GPU-to-GPU", "health status: OK"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	b, _ := os.ReadFile(out)
	var h results.Health
	if err := json.Unmarshal(b, &h); err != nil || len(h.GPUs) != 2 || len(h.GPUs[0].Bench) != 6 || h.GPUs[0].Bench[0].Ratio == nil {
		t.Fatalf("json %v: %+v", err, h)
	}
	// A 40 % straggler flags on GPU-to-GPU; --fail-on-flag makes that exit 1.
	code, text = runCLI(t, "health", "--sim", "--sim-gpus", "2", "--sim-straggler", "1", "--sim-straggler-pct", "40", "--out", "", "--fail-on-flag")
	if code != 1 || !strings.Contains(text, "compare.gpu_to_gpu") {
		t.Errorf("straggler: exit %d:\n%s", code, text)
	}
	runCLI(t, "health", "--sim=false", "--sim-straggler", "-1", "--fail-on-flag=false", "--expect-gpus", "0", "--nvidia-smi-xml", "testdata/h200-idle.xml")
}

// -c: the plan's health section and reference_floors set the checks and the judge, as a run's
// health phase reads them (a Kubernetes node's health Job gets the run's plan so); a flag given
// wins over the plan, and a bad plan is bad input.
func TestHealthReadsThePlan(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "gpuvet.yaml")
	// H200: the catalog's short name, as a run's reference_floors takes it; the sim's GPU is "NVIDIA H200".
	if err := os.WriteFile(plan, []byte("models: [Qwen/Qwen3-8B]\nreference_floors:\n  H200: {gemm_bf16: 1.4}\nhealth: {gemm: false, pcie: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	health := func(args ...string) (int, string, results.Health) {
		t.Helper()
		out := filepath.Join(dir, "h.json")
		code, text := runCLI(t, append([]string{"health", "--sim", "--sim-gpus", "2", "--dcgm=false", "--out", out, "--fail-on-flag"}, args...)...)
		var h results.Health
		b, _ := os.ReadFile(out)
		_ = json.Unmarshal(b, &h)
		os.Remove(out)
		return code, text, h
	}
	benches := func(h results.Health) int {
		if len(h.GPUs) == 0 {
			return -1
		}
		return len(h.GPUs[0].Bench)
	}
	// health.gemm and health.pcie off: no benchmark runs, so no floor can flag.
	if code, text, h := health("-c", plan); code != 0 || h.Status != results.StatusOK || benches(h) != 0 {
		t.Errorf("the plan's health section: exit %d, status %s, %d benchmarks\n%s", code, h.Status, benches(h), text)
	}
	// GEMMs on (--set beats the file): the plan's floor flags every GPU.
	code, text, h := health("-c", plan, "--set", "health.gemm=true")
	if code != 1 || h.Status != results.StatusFlag || !strings.Contains(text, "under its 1.40 floor") {
		t.Errorf("the plan's reference_floors: exit %d, status %s\n%s", code, h.Status, text)
	}
	// A flag wins over the plan: --floor over reference_floors, --no-bench over health.gemm.
	for _, args := range [][]string{{"--floor", "gemm_bf16=0.5"}, {"--no-bench"}} {
		if code, text, h := health(append([]string{"-c", plan, "--set", "health.gemm=true"}, args...)...); code != 0 || h.Status != results.StatusOK {
			t.Errorf("%v over the plan: exit %d, status %s\n%s", args, code, h.Status, text)
		}
	}
	// Without the plan, the datasheet's own floors pass the simulated H200.
	if code, text, h := health(); code != 0 || h.Status != results.StatusOK || benches(h) != 6 {
		t.Errorf("no plan: exit %d, status %s, %d benchmarks\n%s", code, h.Status, benches(h), text)
	}
	if code, text := runCLI(t, "health", "--sim", "-c", plan, "--set", "reference_floors.H9000.gemm_bf16=0.5"); code != 2 || !strings.Contains(text, "H9000") {
		t.Errorf("a GPU the catalog lacks: exit %d\n%s", code, text)
	}
}
