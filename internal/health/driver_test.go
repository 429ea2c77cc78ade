package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// simDriver runs the health phase's inventory (no benchmarks) on four simulated H200s with one of
// the driver's signals played, and judges it.
func simDriver(t *testing.T, recovery, fault string) *results.Health {
	t.Helper()
	f, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: 4, StragglerIndex: -1, Seed: 1, RecoveryAction: recovery, DriverFault: fault})
	if err != nil {
		t.Fatal(err)
	}
	return runJudged(context.Background(), f, nil, Options{Source: "sim", SkipBench: true}, judge.HealthRules{})
}

// TestSimDriverSignals: each --sim-driver-fault kind and each --sim-recovery-action fails or flags
// exactly the GPU it is played on, with its check, layer and action; the simulated kernel log's
// lines reach the judge through the parser a host's /dev/kmsg goes through.
func TestSimDriverSignals(t *testing.T) {
	cases := []struct {
		recovery, fault      string
		gpu                  int
		check, layer, action string
		status               results.Status
	}{
		{"", "1:" + sim.DriverRemapPending, 1, judge.CheckRemap, "gpu", "reset-gpu", results.StatusFlag},
		{"", "2:" + sim.DriverRemapFailure, 2, judge.CheckRemap, "gpu", "drain-rma", results.StatusFailed},
		{"", "0:" + sim.DriverFabric, 0, judge.CheckFabric, "interconnect", "reboot-node", results.StatusFlag},
		{"", "3:" + sim.DriverFallenOffBus, 3, judge.CheckKernelLog, "gpu", "reboot-node", results.StatusFailed},
		{"", "1:" + sim.DriverRequiresReset, 1, judge.CheckKernelLog, "gpu", "reset-gpu", results.StatusFailed},
		{"", "2:" + sim.DriverRmInit, 2, judge.CheckKernelLog, "gpu", "reboot-node", results.StatusFailed},
		{"", "1:" + sim.DriverGSPTimeout, 1, judge.CheckKernelLog, "gpu", "reset-gpu", results.StatusFlag},
		{"3:reset", "", 3, judge.CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed},
		{"0:reboot", "", 0, judge.CheckRecoveryAction, "gpu", "reboot-node", results.StatusFailed},
		{"2:drain-p2p", "", 2, judge.CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed},
		{"1:drain-and-reset", "", 1, judge.CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed},
	}
	if len(cases) != len(sim.DriverFaultKinds)+len(sim.RecoveryActionNames) {
		t.Fatalf("%d cases for %d kinds: a kind without a case", len(cases), len(sim.DriverFaultKinds)+len(sim.RecoveryActionNames))
	}
	for _, c := range cases {
		t.Run(c.recovery+c.fault, func(t *testing.T) {
			h := simDriver(t, c.recovery, c.fault)
			if len(h.Flags) != 0 || h.Status != c.status {
				t.Errorf("host %s, flags %+v; want %s and none on the host", h.Status, h.Flags, c.status)
			}
			for _, gh := range h.GPUs {
				if gh.GPU.Index != c.gpu {
					if gh.Status != results.StatusOK || len(gh.Flags) != 0 {
						t.Errorf("gpu %d: %s %+v; want ok", gh.GPU.Index, gh.Status, gh.Flags)
					}
					continue
				}
				if gh.Status != c.status || len(gh.Flags) != 1 {
					t.Fatalf("gpu %d: %s %+v; want %s with one flag", gh.GPU.Index, gh.Status, gh.Flags, c.status)
				}
				f := gh.Flags[0]
				if f.Check != c.check || f.Layer != c.layer || f.Action != c.action {
					t.Errorf("gpu %d flag %+v; want %s %s %s", gh.GPU.Index, f, c.check, c.layer, c.action)
				}
			}
		})
	}
	// No fault: every GPU ok, the kernel log read (the sim's) and nothing in it unmatched.
	h := simDriver(t, "", "")
	if h.Status != results.StatusOK || h.KernelLog == nil || h.KernelLog.Source != "sim" || h.KernelLog.Records == 0 || len(h.KernelLog.Unmatched) != 0 {
		t.Errorf("healthy: %s, kernel log %+v", h.Status, h.KernelLog)
	}
}

// logSource is a fake source with a kernel log: a fixture's text, or an error.
type logSource struct {
	*fakeSource
	text []byte
	err  error
}

func (s logSource) KernelLog() (gpu.KernelLogText, error) {
	return gpu.KernelLogText{Source: "/dev/kmsg", Text: s.text, Records: strings.Count(string(s.text), "\n")}, s.err
}

// TestKernelLogFixture puts the fixture's lines on the GPUs at their addresses (the h200x2
// capture's 0000:00:06 and 0000:00:07), counts repeats, and leaves the lost GPU's lines and the
// one with no address to the host; an application's Xid is a note; an unreadable log is a note,
// never a failure.
func TestKernelLogFixture(t *testing.T) {
	text, err := os.ReadFile("../gpu/testdata/kmsg-driver-errors.txt")
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(2)
	f.gpus[0].PCIBusID, f.gpus[1].PCIBusID = "00000000:00:06.0", "00000000:00:07.0"
	h := runJudged(context.Background(), logSource{fakeSource: f, text: text}, nil, Options{Source: "nvml", SkipBench: true}, judge.HealthRules{})
	got := func(evs []results.KernelEvent) string {
		var s []string
		for _, e := range evs {
			s = append(s, fmt.Sprintf("%s/%d×%d", e.Kind, e.XID, e.Count))
		}
		return strings.Join(s, " ")
	}
	if g := got(h.GPUs[0].KernelLog); g != "xid/13×2" {
		t.Errorf("gpu 0 events: %s", g)
	}
	if g := got(h.GPUs[1].KernelLog); g != "fallen_off_bus/79×2 requires_reset/0×1" {
		t.Errorf("gpu 1 events: %s", g)
	}
	if g := got(h.KernelLog.Unmatched); g != "rm_init_failed/0×1 rm_init_failed/0×1" {
		t.Errorf("unmatched: %s", g)
	}
	// GPU 0's Xid 13 (a python3 process's graphics exception) is an application's fault since boot:
	// a note, not a flag; GPU 1 fell off the bus.
	if h.GPUs[0].Status != results.StatusOK || !strings.Contains(strings.Join(h.GPUs[0].Notes, " "), "Xid 13 (2 times since boot)") ||
		h.GPUs[1].Status != results.StatusFailed || len(h.Flags) != 2 || h.Status != results.StatusFailed {
		t.Errorf("gpu 0 %s %q, gpu 1 %s, host flags %v, host %s", h.GPUs[0].Status, h.GPUs[0].Notes, h.GPUs[1].Status, flagsOf(h), h.Status)
	}

	h = runJudged(context.Background(), logSource{fakeSource: newFake(2), err: errors.New("open /dev/kmsg: operation not permitted")}, nil, Options{Source: "nvml", SkipBench: true}, judge.HealthRules{})
	if h.Status != results.StatusOK || h.KernelLog == nil || !strings.Contains(h.KernelLog.Note, "not permitted") || !strings.Contains(strings.Join(h.Notes, "\n"), "kernel log not read") {
		t.Errorf("unreadable log: %s %+v %v", h.Status, h.KernelLog, h.Notes)
	}
}
