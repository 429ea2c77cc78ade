package main

import (
	"strings"
	"testing"
)

// TestHealthSimLinkFault: a degraded link on a virtual GPU is flagged, and --fail-on-flag exits 1.
func TestHealthSimLinkFault(t *testing.T) {
	defer runCLI(t, "health", "--sim=false", "--sim-link-fault", "", "--fail-on-flag=false")
	code, text := runCLI(t, "health", "--nvidia-smi-xml", "", "--sim", "--sim-gpus", "2", "--sim-straggler", "-1", "--burn", "0s",
		"--out", "", "--expect-gpus", "2", "--sim-link-fault", "1:slow", "--fail-on-flag")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, text)
	}
	for _, want := range []string{"Peer-to-peer copy", "NV18", "health.p2p_bandwidth", "health.all_reduce", "All-reduce (ok"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// A link down fails the GPU even without --fail-on-flag.
	code, text = runCLI(t, "health", "--sim", "--sim-gpus", "2", "--sim-link-fault", "0", "--fail-on-flag=false")
	if code != 1 || !strings.Contains(text, "health.nvlink_down") || !strings.Contains(text, "NV16") {
		t.Errorf("link down: exit %d:\n%s", code, text)
	}
}

func TestHealthLinkCaptures(t *testing.T) {
	code, text := runCLI(t, "health", "--sim=false", "--sim-link-fault", "", "--expect-gpus", "2", "--nvidia-smi-xml", "testdata/h200x2.xml",
		"--nvidia-smi-topo", "testdata/h200x2-topo.txt", "--nvidia-smi-nvlink", "testdata/h200x2-nvlink.txt")
	defer runCLI(t, "health", "--sim=false", "--expect-gpus", "0", "--nvidia-smi-xml", "testdata/h200-idle.xml", "--nvidia-smi-topo", "", "--nvidia-smi-nvlink", "")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	for _, want := range []string{"Interconnect (source: nvidia-smi)", "GPU0  X     NV18", "18/18", "26.562 GB/s"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

func TestHealthInterconnectFlagsChecked(t *testing.T) {
	for _, args := range [][]string{
		{"health", "--sim", "--sim-gpus", "2", "--sim-link-fault", "5"},
		{"health", "--sim", "--sim-gpus", "2", "--sim-link-fault", "0:flaky"},
		{"health", "--sim=false", "--sim-link-fault", "", "--nvidia-smi-xml", "", "--nvidia-smi-topo", "testdata/h200x2-topo.txt"},
		{"health", "--sim", "--nvidia-smi-topo", "", "--min-link-ratio", "1.5"},
	} {
		code, text := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, text)
		}
	}
	runCLI(t, "health", "--sim=false", "--sim-link-fault", "", "--min-link-ratio", "0.5", "--nvidia-smi-xml", "testdata/h200-idle.xml")
}
