package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The driver's own signals end to end: `gpuvet run --sim --sim-recovery-action 3:reset` fails GPU 3,
// and only GPU 3, for health.recovery_action, its flag in summary.json with layer gpu and action
// reset-gpu; no other GPU is failed or flagged.
func TestRunSimRecoveryActionFailsThatGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	code, text, s := runSim(t, "--sim-gpus", "4", "--sim-recovery-action", "3:reset")
	if code != 1 || s.Status != results.StatusFailed {
		t.Fatalf("exit %d, status %s; want 1 and failed:\n%s", code, s.Status, text)
	}
	host := s.Hosts[0]
	for _, v := range host.GPUs {
		switch {
		case v.Index == 3 && (v.Status != results.StatusFailed || strings.Join(v.Checks, ",") != "health.recovery_action" || v.Action != results.ActionResetGPU):
			t.Errorf("gpu 3 verdict %+v; want failed for health.recovery_action alone, action reset-gpu", v)
		case v.Index != 3 && (v.Status == results.StatusFailed || v.Status == results.StatusFlag):
			t.Errorf("gpu %d verdict %+v; want neither failed nor flag", v.Index, v)
		}
	}
	for _, gh := range host.Health.GPUs {
		if gh.GPU.Index != 3 {
			if len(gh.Flags) != 0 || gh.Status != results.StatusOK {
				t.Errorf("gpu %d health %s %+v; want ok", gh.GPU.Index, gh.Status, gh.Flags)
			}
			continue
		}
		if gh.GPU.RecoveryAction != results.RecoveryGPUReset || gh.Status != results.StatusFailed || len(gh.Flags) != 1 {
			t.Fatalf("gpu 3 health: recovery %q status %s flags %+v", gh.GPU.RecoveryAction, gh.Status, gh.Flags)
		}
		if f := gh.Flags[0]; f.Check != "health.recovery_action" || f.Layer != "gpu" || f.Action != "reset-gpu" {
			t.Errorf("gpu 3 flag %+v; want health.recovery_action, layer gpu, action reset-gpu", f)
		}
	}
	if len(host.Health.Flags) != 0 {
		t.Errorf("host health flags %+v; want none", host.Health.Flags)
	}
}

// `gpuvet health --sim --sim-driver-fault`: a kernel-log fault fails that GPU (exit 1), its JSON
// keeps the driver's line; a fault that only flags exits 0 without --fail-on-flag.
func TestHealthSimDriverFault(t *testing.T) {
	out := filepath.Join(t.TempDir(), "health.json")
	code, text := runCLI(t, "health", "--sim", "--sim-gpus", "4", "--no-bench", "--sim-driver-fault", "2:fallen-off-bus", "--out", out)
	if code != 1 || !strings.Contains(text, "health.kernel_log") || !strings.Contains(text, "fell off the bus") {
		t.Fatalf("exit %d, want 1 naming health.kernel_log:\n%s", code, text)
	}
	var h results.Health
	raw, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(raw, &h) != nil {
		t.Fatalf("no result: %v", err)
	}
	for _, gh := range h.GPUs {
		want := results.StatusOK
		if gh.GPU.Index == 2 {
			want = results.StatusFailed
			if len(gh.KernelLog) != 1 || gh.KernelLog[0].Kind != results.KernelFallenOffBus || gh.KernelLog[0].Count != 2 || !strings.Contains(gh.KernelLog[0].Line, "Xid") {
				t.Errorf("gpu 2 kernel log %+v", gh.KernelLog)
			}
		}
		if gh.Status != want {
			t.Errorf("gpu %d: %s, want %s", gh.GPU.Index, gh.Status, want)
		}
	}
	code, text = runCLI(t, "health", "--sim", "--sim-gpus", "2", "--no-bench", "--sim-driver-fault", "1:fabric")
	if code != 0 || !strings.Contains(text, "health.fabric") || !strings.Contains(text, "falls back to PCIe") {
		t.Errorf("fabric: exit %d, want 0 and a flag:\n%s", code, text)
	}
}

// The real format: a capture whose driver asks for a node reboot fails `gpuvet health`.
func TestHealthXMLRecoveryAction(t *testing.T) {
	code, text := runCLI(t, "health", "--nvidia-smi-xml", "../../internal/gpu/testdata/h200-recovery-node-reboot.xml")
	if code != 1 || !strings.Contains(text, "health.recovery_action") || !strings.Contains(text, "node reboot") {
		t.Errorf("exit %d, want 1 naming the recovery action:\n%s", code, text)
	}
}

// A bad --sim-recovery-action or --sim-driver-fault is bad input (exit 2) naming the flag or key,
// before anything starts.
func TestDriverFaultFlagsValidated(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"health", "--sim", "--sim-gpus", "4", "--sim-recovery-action", "3:rma"}, "--sim-recovery-action: recovery action \"3:rma\""},
		{[]string{"health", "--sim", "--sim-gpus", "2", "--sim-driver-fault", "2:fabric"}, "--sim-driver-fault: driver fault \"2:fabric\": want GPU:KIND with GPU 0–1"},
		{[]string{"health", "--sim-driver-fault", "0:fabric"}, "--sim-recovery-action and --sim-driver-fault need --sim"},
		{[]string{"run", "--sim", "--out", dir, "--sim-recovery-action", "9:reset"}, "--sim-recovery-action (sim.recovery_action): want"},
		{[]string{"run", "--sim", "--out", dir, "--sim-driver-fault", "1:xid"}, "--sim-driver-fault (sim.driver_fault): want"},
	} {
		code, text := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(text, c.says) {
			t.Errorf("%v: exit %d, want 2 saying %q:\n%s", c.args, code, c.says, text)
		}
	}
}
