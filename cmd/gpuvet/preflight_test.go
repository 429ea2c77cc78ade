package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 41: a bare `gpuvet run` on a GPU host with no vLLM and no cached model is refused at once
// (exit 2), naming the engine and the model with their fixes, before the health phase measures
// anything; it used to run health first and then fail with "model cache FAILED".
func TestBareRunOnAnEmptyHostRefusesBeforeHealth(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := "http://" + l.Addr().String()
	l.Close() // nothing answers there: an air-gapped host
	out := filepath.Join(t.TempDir(), "out")
	cmd := gpuvet("run", "--out", out, "--set", "health.source=testdata/h200x2.xml",
		"--set", "model_cache.dir="+t.TempDir(), "--set", "model_cache.endpoint="+hub, "--set", "engine.env.PATH="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2:\n%s", err, stderr.String())
	}
	for _, want := range []string{`vllm is not installed: no "vllm" on the engine's PATH`, "`pip install vllm`", "--engine transformers",
		"model Qwen/Qwen3-8B is not in the model cache", "gpuvet cache pull Qwen/Qwen3-8B"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "health") {
		t.Errorf("the health phase ran:\n%s", stderr.String())
	}
}

// A co-tenant's or a throttle's span whose end is not after its start, and more GPUs than the simulator has, are bad
// input, exit 2 before anything ran (no output folder made), as every other bad --sim-* flag is:
// the first failed the host at discovery (exit 1, a failed node in the history), the second ran
// the 4 GPUs there were without a word (issue 51).
func TestSimCoTenantSpanRefusedUpFront(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sim-cotenant", "1:20s-5s"}, "TO is not a duration after FROM"},
		{[]string{"--sim-throttle", "2:hw_slowdown:30s-10s"}, "TO is not a duration after FROM"},    // failed the host at discovery
		{[]string{"--gpu-count", "9"}, "--gpu-count 9 (run.gpu_count): the simulator has 4 GPU(s)"}, // it ran 4 without a word
	} {
		b, err := gpuvet(append([]string{"run", "--sim", "--out", out}, c.args...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), c.want) {
			t.Fatalf("%v: exit %v, want 2 saying %q:\n%s", c.args, err, c.want, b)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: the refused run made its output folder", c.args)
		}
	}
}

// Issue 51: a value given whole (a 100 KB --model or --sim-gpu) is not echoed whole by the error
// that refuses it: its start, and how long it was.
func TestHugeFlagValueIsNotEchoedWhole(t *testing.T) {
	huge := strings.Repeat("x", 100_000)
	for _, flag := range []string{"--model", "--sim-gpu"} {
		b, err := gpuvet("run", "--sim", "--out", filepath.Join(t.TempDir(), "out"), flag, huge).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || len(b) > 2000 || !strings.Contains(string(b), "(100000 bytes)") {
			t.Errorf("%s of 100 KB: exit %v, %d bytes of output, want exit 2 and the value cut:\n%.300s", flag, err, len(b), b)
		}
	}
}
