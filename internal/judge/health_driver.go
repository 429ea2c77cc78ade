package judge

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The driver's own signals (docs/detection.md, "The driver's own signals"): what the NVIDIA driver
// itself says a GPU needs never passes silently, whatever else measured well. DCGM has called such
// GPUs healthy (DCGM issue #263); gpuvet does not.
const (
	CheckRecoveryAction = "health.recovery_action" // the driver asks for a reset, a reboot or a drain: failed
	CheckFabric         = "health.fabric"          // NVLink fabric registration not completed or unhealthy
	CheckKernelLog      = "health.kernel_log"      // the driver's kernel-log lines about the GPU since boot
)

// driverFlags are the flags of one GPU's driver signals (recovery action, row remapping, fabric,
// kernel log), each with its layer, action, and whether it fails the GPU (not usable as it is).
func driverFlags(gh *results.GPUHealth) []results.Flag {
	g := gh.GPU
	var out []results.Flag
	add := func(check, layer, action string, fails bool, format string, args ...any) {
		out = append(out, results.Flag{Scope: "gpu", Subject: gpuSubject(g), Check: check, Reason: fmt.Sprintf(format, args...), Layer: layer, Action: action, Fails: fails})
	}
	reset := fmt.Sprintf("`nvidia-smi -r -i %d`", g.Index)
	switch ra := g.RecoveryAction; ra {
	case "", results.RecoveryNone:
	case results.RecoveryGPUReset:
		add(CheckRecoveryAction, results.LayerGPU, results.ActionResetGPU, true, "the driver asks for a GPU reset (NVML recovery action GPU Reset): the GPU is not usable until then; drain its work, reset it (%s) and vet it again", reset)
	case results.RecoveryNodeReboot:
		add(CheckRecoveryAction, results.LayerGPU, results.ActionRebootNode, true, "the driver asks for a node reboot (NVML recovery action Node Reboot): the GPU is not usable until then; drain the node, reboot it and vet it again")
	case results.RecoveryDrainAndReset:
		add(CheckRecoveryAction, results.LayerGPU, results.ActionResetGPU, true, "the driver asks to drain and reset the GPU (NVML recovery action Drain and Reset): drain its work first, then reset it (%s) and vet it again", reset)
	case results.RecoveryDrainP2P:
		add(CheckRecoveryAction, results.LayerGPU, results.ActionResetGPU, true, "the driver asks to drain peer-to-peer traffic (NVML recovery action Drain P2P): stop the work that uses this GPU's NVLink/P2P, then reset it (%s) and vet it again", reset)
	default:
		add(CheckRecoveryAction, results.LayerGPU, results.ActionResetGPU, true, "the driver reports recovery action %q, one gpuvet does not know: treat it as a reset: drain the GPU's work, reset it (%s), and read `nvidia-smi -q` for the driver's guidance", ra, reset)
	}
	if rr := g.RemappedRows; rr != nil {
		if rr.Failure {
			add(CheckRemap, results.LayerGPU, results.ActionDrainRMA, true, "row remapping failed (%d uncorrectable rows remapped): the HBM has no spare rows left: drain the GPU and RMA it", rr.Uncorrectable)
		} else if rr.Pending {
			add(CheckRemap, results.LayerGPU, results.ActionResetGPU, false, "a row remap is pending: it takes effect at the next reset: drain the GPU and reset it (%s), or reboot", reset)
		}
	}
	if f := g.Fabric; f != nil && fabricBad(f) {
		add(CheckFabric, results.LayerInterconnect, results.ActionRebootNode, false, "NVLink fabric registration %s: a GPU whose fabric is not registered silently falls back to PCIe for peer traffic; restart nvidia-fabricmanager (`systemctl restart nvidia-fabricmanager`) or reboot the node, then vet it again", fabricWords(f))
	}
	for _, ev := range gh.KernelLog {
		if appKernelXID(ev) {
			// Any program's bad kernel raises it, since boot: the benchmarks and the burn judge the GPU.
			gh.Notes = appendNew(gh.Notes, fmt.Sprintf("the driver's kernel log has Xid %d (%s since boot): %q: an XID NVIDIA answers by restarting the application, which an application's own fault raises as readily as the GPU's; not held against the GPU (its benchmarks and burn judge it)", ev.XID, times(ev.Count), clipText(ev.Line, 160)))
			continue
		}
		layer, action, fails, what := kernelKind(ev)
		add(CheckKernelLog, layer, action, fails, "the driver's kernel log says %s (%s since boot): %q; %s", what, times(ev.Count), clipText(ev.Line, 160), results.ActionWords[action])
	}
	return out
}

// fabricBad: a registration that is not completed, ended with an error, or is not healthy.
func fabricBad(f *results.Fabric) bool {
	return !strings.EqualFold(f.State, "Completed") ||
		f.Status != "" && !strings.EqualFold(f.Status, "Success") ||
		f.Health != "" && !strings.EqualFold(f.Health, "Healthy")
}

func fabricWords(f *results.Fabric) string {
	s := fmt.Sprintf("state %q", f.State)
	if f.Status != "" {
		s += fmt.Sprintf(", status %q", f.Status)
	}
	if f.Health != "" {
		s += fmt.Sprintf(", health %q", f.Health)
	}
	return s
}

// kernelKind is a kernel-log event's layer, what it asks for, whether it makes the GPU failed, and
// its words.
func kernelKind(ev results.KernelEvent) (layer, action string, fails bool, what string) {
	switch ev.Kind {
	case results.KernelFallenOffBus:
		return results.LayerGPU, results.ActionRebootNode, true, "the GPU fell off the bus"
	case results.KernelRequiresReset:
		return results.LayerGPU, results.ActionResetGPU, true, "the GPU requires a reset"
	case results.KernelRmInitFailed:
		return results.LayerGPU, results.ActionRebootNode, true, "the driver could not initialise the GPU (RmInitAdapter failed)"
	case results.KernelGSPTimeout:
		return results.LayerGPU, results.ActionResetGPU, false, "the GPU's GSP firmware timed out"
	}
	switch {
	case ev.XID > 0 && xidLayer(uint64(ev.XID)) == results.LayerInterconnect:
		return results.LayerInterconnect, results.ActionResetGPU, false, fmt.Sprintf("Xid %d (an NVLink error)", ev.XID)
	case ev.XID > 0:
		return results.LayerGPU, results.ActionResetGPU, false, fmt.Sprintf("Xid %d", ev.XID)
	}
	return results.LayerGPU, results.ActionResetGPU, false, "an error"
}

// appKernelXID reports whether a kernel-log event is an application's Xid (xidLayer: the engine's).
func appKernelXID(ev results.KernelEvent) bool {
	return ev.Kind == results.KernelXID && ev.XID > 0 && xidLayer(uint64(ev.XID)) == results.LayerEngine
}

func times(n int) string {
	if n <= 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// judgeKernelLogHost flags the driver's kernel-log lines that name no GPU of the host: a GPU the
// driver lost that discovery no longer shows (or a line with no PCI address).
func judgeKernelLogHost(h *results.Health) {
	kl := h.KernelLog
	if kl == nil {
		return
	}
	for _, ev := range kl.Unmatched {
		if appKernelXID(ev) && ev.BusID == "" {
			h.Notes = appendNew(h.Notes, fmt.Sprintf("the driver's kernel log has Xid %d naming no PCI address (%s since boot): %q: an application's fault raises it as readily as a GPU's; not held against the host's GPUs", ev.XID, times(ev.Count), clipText(ev.Line, 160)))
			continue
		}
		layer, action, _, what := kernelKind(ev)
		subject, where := "host", "naming no PCI address"
		if ev.BusID != "" {
			subject, where, action = "PCI "+ev.BusID, "for the GPU at PCI "+ev.BusID, results.ActionRebootNode
			where += paren(ev.UUID) + ", which discovery no longer shows: a GPU the driver lost"
		}
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: subject, Check: CheckKernelLog, Layer: layer, Action: action,
			Reason: fmt.Sprintf("the driver's kernel log says %s %s (%s since boot): %q; %s, and check `nvidia-smi -L` against the GPUs installed", what, where, times(ev.Count), clipText(ev.Line, 160), results.ActionWords[action])})
	}
}
