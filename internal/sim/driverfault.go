package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The driver's own signals the simulator can play on one GPU, so each has an end-to-end test
// (docs/detection.md): FleetConfig.RecoveryAction shows NVML's GPU recovery action in the GPU's
// inventory; FleetConfig.DriverFault shows remap-pending and remap-failure in its row remapping,
// fabric in its fabric registration, and the rest as the driver's lines in the fleet's KernelLog,
// which gpuvet reads through the same parser as a host's /dev/kmsg.

// RecoveryActions are the sim's names of the recovery actions, and what NVML calls each.
var RecoveryActions = map[string]string{
	"reset": results.RecoveryGPUReset, "reboot": results.RecoveryNodeReboot,
	"drain-p2p": results.RecoveryDrainP2P, "drain-and-reset": results.RecoveryDrainAndReset,
}

// RecoveryActionNames lists them, for help and validation.
var RecoveryActionNames = []string{"reset", "reboot", "drain-p2p", "drain-and-reset"}

// The driver faults (FleetConfig.DriverFault's KIND).
const (
	DriverRemapPending  = "remap-pending"
	DriverRemapFailure  = "remap-failure"
	DriverFabric        = "fabric"
	DriverFallenOffBus  = "fallen-off-bus"
	DriverRequiresReset = "requires-reset"
	DriverRmInit        = "rm-init"
	DriverGSPTimeout    = "gsp-timeout"
)

// DriverFaultKinds lists the kinds, for help and validation.
var DriverFaultKinds = []string{DriverRemapPending, DriverRemapFailure, DriverFabric, DriverFallenOffBus, DriverRequiresReset, DriverRmInit, DriverGSPTimeout}

// gpuFault is a parsed "GPU:KIND"; gpu -1: none.
type gpuFault struct {
	gpu  int
	kind string
}

// parseGPUKind reads "GPU:KIND" ("" is none) with KIND one of kinds.
func parseGPUKind(what, s string, count int, kinds []string, example string) (gpuFault, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return gpuFault{gpu: -1}, nil
	}
	g, k, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(g)
	if !ok || err != nil || n < 0 || n >= count || !slices.Contains(kinds, k) {
		return gpuFault{}, fmt.Errorf("%s %q: want GPU:KIND with GPU 0–%d and KIND one of %s, e.g. %s", what, s, count-1, strings.Join(kinds, ", "), example)
	}
	return gpuFault{gpu: n, kind: k}, nil
}

// ParseRecoveryAction reads FleetConfig.RecoveryAction: "GPU:ACTION" ("" is none).
func ParseRecoveryAction(s string, count int) (gpu int, action string, err error) {
	f, err := parseGPUKind("recovery action", s, count, RecoveryActionNames, "3:reset")
	return f.gpu, f.kind, err
}

// ParseDriverFault reads FleetConfig.DriverFault: "GPU:KIND" ("" is none).
func ParseDriverFault(s string, count int) (gpu int, kind string, err error) {
	f, err := parseGPUKind("driver fault", s, count, DriverFaultKinds, "1:fallen-off-bus")
	return f.gpu, f.kind, err
}

// busID is GPU i's PCI address as NVML writes it.
func busID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10%0xe0) }

// driverSignals sets what GPU i's inventory shows of the driver: its recovery action, row
// remapping and fabric registration.
func (f *Fleet) driverSignals(i int, g *results.GPUInfo) {
	g.RecoveryAction = results.RecoveryNone
	if f.recovery.gpu == i {
		g.RecoveryAction = RecoveryActions[f.recovery.kind]
	}
	if f.gpu.NVLinks() > 0 && f.cfg.Count > 1 { // an NVLink host: its fabric registered
		g.Fabric = &results.Fabric{State: "Completed", Status: "Success", Health: "Healthy"}
	}
	if f.driverFault.gpu != i {
		return
	}
	switch f.driverFault.kind {
	case DriverRemapPending:
		g.RemappedRows = &results.RemappedRows{Uncorrectable: 1, Pending: true}
	case DriverRemapFailure:
		g.RemappedRows = &results.RemappedRows{Uncorrectable: 512, Failure: true}
	case DriverFabric:
		g.Fabric = &results.Fabric{State: "In Progress"}
	}
}

// KernelLog is the fleet's kernel log as /dev/kmsg records: the driver loading, each GPU's
// "GPU at" line, and the lines of the driver fault that is played on a GPU.
func (f *Fleet) KernelLog() (gpu.KernelLogText, error) {
	var b strings.Builder
	seq, us := 1000, int64(5_300_000)
	rec := func(prio int, msg string) {
		fmt.Fprintf(&b, "%d,%d,%d,-;%s\n", prio, seq, us, msg)
		seq++
		us += 1_234
	}
	rec(6, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build  (sim)")
	for i := 0; i < f.cfg.Count; i++ {
		rec(6, fmt.Sprintf("nvidia %s: enabling device (0000 -> 0002)", f.busID(i)))
	}
	if i := f.driverFault.gpu; i >= 0 {
		pci := f.busID(i) // 0000:48:00.0
		short := strings.TrimSuffix(pci, ".0")
		us = 812_345_678
		rec(4, fmt.Sprintf("NVRM: GPU at PCI:%s: %s", short, f.uuid(i)))
		rec(4, fmt.Sprintf("NVRM: GPU Board Serial Number: SIM%010d", i))
		switch f.driverFault.kind {
		case DriverFallenOffBus:
			rec(4, fmt.Sprintf("NVRM: Xid (PCI:%s): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", short))
			rec(3, fmt.Sprintf("NVRM: GPU %s: GPU has fallen off the bus.", pci))
		case DriverRequiresReset:
			rec(3, fmt.Sprintf("NVRM: GPU %s: GPU requires reset", pci))
		case DriverRmInit:
			rec(3, fmt.Sprintf("NVRM: GPU %s: RmInitAdapter failed! (0x62:0x40:2497)", pci))
			rec(3, fmt.Sprintf("NVRM: GPU %s: rm_init_adapter failed, device minor number %d", pci, i))
		case DriverGSPTimeout:
			rec(4, fmt.Sprintf("NVRM: Xid (PCI:%s): 119, pid=2121, name=python3, Timeout after 6s of waiting for RPC response from GPU%d GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).", short, i))
		}
	}
	text := b.String()
	return gpu.KernelLogText{Source: "sim", Text: []byte(text), Records: strings.Count(text, "\n")}, nil
}
