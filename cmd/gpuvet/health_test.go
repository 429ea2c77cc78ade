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
	code, text := runCLI(t, "health", "--nvidia-smi-xml", "", "--sim", "--sim-count", "2", "--sim-straggler", "-1", "--burn", "0s", "--out", out, "--expect-gpus", "2", "--fail-on-flag")
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
	code, text = runCLI(t, "health", "--sim", "--sim-count", "2", "--sim-straggler", "1", "--sim-straggler-pct", "40", "--out", "", "--fail-on-flag")
	if code != 1 || !strings.Contains(text, "compare.gpu_to_gpu") {
		t.Errorf("straggler: exit %d:\n%s", code, text)
	}
	runCLI(t, "health", "--sim=false", "--sim-straggler", "-1", "--fail-on-flag=false", "--expect-gpus", "0", "--nvidia-smi-xml", "testdata/h200-idle.xml")
}
