package judge

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// TestDriverSignals: each of the driver's signals on GPU 1 of three fails or flags GPU 1 alone,
// with its check, layer and action; the others stay ok.
func TestDriverSignals(t *testing.T) {
	ev := func(kind string, xid int) []results.KernelEvent {
		return []results.KernelEvent{{Kind: kind, XID: xid, BusID: "0000:28:00", Line: "NVRM: a line", Count: 2}}
	}
	cases := []struct {
		name                 string
		mod                  func(gh *results.GPUHealth)
		check, layer, action string
		status               results.Status
		says                 string
	}{
		{"recovery none", func(gh *results.GPUHealth) { gh.GPU.RecoveryAction = "none" }, "", "", "", results.StatusOK, ""},
		{"recovery reset", func(gh *results.GPUHealth) { gh.GPU.RecoveryAction = "gpu_reset" }, CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed, "nvidia-smi -r -i 1"},
		{"recovery reboot", func(gh *results.GPUHealth) { gh.GPU.RecoveryAction = "node_reboot" }, CheckRecoveryAction, "gpu", "reboot-node", results.StatusFailed, "reboot"},
		{"recovery drain and reset", func(gh *results.GPUHealth) { gh.GPU.RecoveryAction = "drain_and_reset" }, CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed, "drain its work first"},
		{"recovery drain p2p", func(gh *results.GPUHealth) { gh.GPU.RecoveryAction = "drain_p2p" }, CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed, "peer-to-peer"},
		{"recovery unknown", func(gh *results.GPUHealth) { gh.GPU.RecoveryAction = "Recover IMEX Domain" }, CheckRecoveryAction, "gpu", "reset-gpu", results.StatusFailed, `"Recover IMEX Domain"`},
		{"remap pending", func(gh *results.GPUHealth) { gh.GPU.RemappedRows = &results.RemappedRows{Pending: true} }, CheckRemap, "gpu", "reset-gpu", results.StatusFlag, "next reset"},
		{"remap failure", func(gh *results.GPUHealth) {
			gh.GPU.RemappedRows = &results.RemappedRows{Failure: true, Uncorrectable: 512}
		}, CheckRemap, "gpu", "drain-rma", results.StatusFailed, "RMA"},
		{"fabric completed", func(gh *results.GPUHealth) {
			gh.GPU.Fabric = &results.Fabric{State: "Completed", Status: "Success", Health: "Healthy"}
		}, "", "", "", results.StatusOK, ""},
		{"fabric in progress", func(gh *results.GPUHealth) { gh.GPU.Fabric = &results.Fabric{State: "In Progress"} }, CheckFabric, "interconnect", "reboot-node", results.StatusFlag, "falls back to PCIe"},
		{"fabric error", func(gh *results.GPUHealth) {
			gh.GPU.Fabric = &results.Fabric{State: "Completed", Status: "Insufficient Resources"}
		}, CheckFabric, "interconnect", "reboot-node", results.StatusFlag, "Insufficient Resources"},
		{"fabric unhealthy", func(gh *results.GPUHealth) {
			gh.GPU.Fabric = &results.Fabric{State: "Completed", Status: "Success", Health: "Unhealthy"}
		}, CheckFabric, "interconnect", "reboot-node", results.StatusFlag, "nvidia-fabricmanager"},
		{"fallen off the bus", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelFallenOffBus, 79) }, CheckKernelLog, "gpu", "reboot-node", results.StatusFailed, "fell off the bus (2 times since boot)"},
		{"requires reset", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelRequiresReset, 0) }, CheckKernelLog, "gpu", "reset-gpu", results.StatusFailed, "requires a reset"},
		{"rm init", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelRmInitFailed, 0) }, CheckKernelLog, "gpu", "reboot-node", results.StatusFailed, "RmInitAdapter"},
		{"gsp timeout", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelGSPTimeout, 119) }, CheckKernelLog, "gpu", "reset-gpu", results.StatusFlag, "GSP"},
		{"xid", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelXID, 48) }, CheckKernelLog, "gpu", "reset-gpu", results.StatusFlag, "Xid 48"},
		{"nvlink xid", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelXID, 74) }, CheckKernelLog, "interconnect", "reset-gpu", results.StatusFlag, "NVLink"},
		// An application's XID since boot (an engine's bad kernel weeks ago) is a note, not the GPU's.
		{"application xid", func(gh *results.GPUHealth) { gh.KernelLog = ev(results.KernelXID, 31) }, "", "", "", results.StatusOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &results.Health{Source: "nvml"}
			for i := 0; i < 3; i++ {
				h.GPUs = append(h.GPUs, results.GPUHealth{GPU: results.GPUInfo{Index: i, Name: "NVIDIA H200", UUID: "GPU-" + string(rune('a'+i))}})
			}
			c.mod(&h.GPUs[1])
			Health(h, DefaultHealthRules())
			for i, gh := range h.GPUs {
				want, flags := results.StatusOK, 0
				if i == 1 {
					want = c.status
					if c.check != "" {
						flags = 1
					}
				}
				if gh.Status != want || len(gh.Flags) != flags {
					t.Fatalf("gpu %d: %s with %+v; want %s with %d flag(s)", i, gh.Status, gh.Flags, want, flags)
				}
			}
			if c.name == "application xid" && !strings.Contains(strings.Join(h.GPUs[1].Notes, " "), "Xid 31 (2 times since boot)") {
				t.Errorf("application xid: no note: %q", h.GPUs[1].Notes)
			}
			if c.check == "" {
				return
			}
			f := h.GPUs[1].Flags[0]
			if f.Check != c.check || f.Layer != c.layer || f.Action != c.action || !strings.Contains(f.Reason, c.says) || strings.Contains(f.Reason, "\n") {
				t.Errorf("flag %+v; want %s %s %s saying %q", f, c.check, c.layer, c.action, c.says)
			}
			if h.Status != c.status || len(h.Flags) != 0 {
				t.Errorf("host %s %+v; want %s and no host flag", h.Status, h.Flags, c.status)
			}
			// Judged again (a loaded result), the same.
			Health(h, DefaultHealthRules())
			if h.GPUs[1].Status != c.status || len(h.GPUs[1].Flags) != 1 {
				t.Errorf("judged again: %s %+v", h.GPUs[1].Status, h.GPUs[1].Flags)
			}
		})
	}
}

// TestKernelLogLostGPU: the driver's lines for an address no GPU has flag the host (a GPU the
// driver lost), naming the address and its UUID; a line with no address flags the host too.
func TestKernelLogLostGPU(t *testing.T) {
	h := &results.Health{Source: "nvml", GPUs: []results.GPUHealth{{GPU: results.GPUInfo{Index: 0, Name: "NVIDIA H200", PCIBusID: "00000000:00:06.0"}}},
		KernelLog: &results.KernelLog{Source: "/dev/kmsg", Records: 900, Unmatched: []results.KernelEvent{
			{Kind: results.KernelFallenOffBus, XID: 79, BusID: "0000:18:00", UUID: "GPU-lost", Line: "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.", Count: 1},
			{Kind: results.KernelGSPTimeout, Line: "NVRM: GPU0 GSP RPC timeout", Count: 3},
		}}}
	Health(h, DefaultHealthRules())
	if len(h.Flags) != 2 || h.GPUs[0].Status != results.StatusOK || h.Status != results.StatusFlag {
		t.Fatalf("flags %+v gpu %s host %s", h.Flags, h.GPUs[0].Status, h.Status)
	}
	lost, noAddr := h.Flags[0], h.Flags[1]
	if lost.Scope != "host" || lost.Subject != "PCI 0000:18:00" || lost.Check != CheckKernelLog || lost.Layer != "gpu" || lost.Action != "reboot-node" ||
		!strings.Contains(lost.Reason, "GPU-lost") || !strings.Contains(lost.Reason, "discovery no longer shows") {
		t.Errorf("lost GPU: %+v", lost)
	}
	if noAddr.Subject != "host" || noAddr.Action != "reset-gpu" || !strings.Contains(noAddr.Reason, "3 times") || !strings.Contains(noAddr.Reason, "no PCI address") {
		t.Errorf("no address: %+v", noAddr)
	}
}

// A failed DCGM test is the layer it tests: the host's software (DCGM 4's software test, DCGM 3's
// persistence mode) is the host's, to fix and rerun, the GPU not flagged; a PCIe bandwidth test the
// interconnect's; memory and every other test the GPU's; a software test failed on the GPU's own
// state (a pending row remap) the GPU's.
func TestDCGMTestsByLayer(t *testing.T) {
	cases := []struct {
		name, info, check, layer, action string
	}{
		{"software", "Persistence mode for GPU 1 is disabled. Enable persistence mode by running \"nvidia-smi -i 1 -pm 1\" as root.", CheckDCGMSoftware, "host", "rerun"},
		{"Persistence Mode", "", CheckDCGMSoftware, "host", "rerun"},
		{"software", "GPU 1 has uncorrectable memory errors and row remappings are pending", CheckDCGM, "gpu", "reset-gpu"},
		{"PCIe", "GPU 1 host-to-device bandwidth 3.1 GB/s is below the minimum 8.0 GB/s", CheckDCGMLink, "interconnect", "reboot-node"},
		{"Memory", "bad page", CheckDCGM, "gpu", "reset-gpu"},
		{"targeted_stress", "", CheckDCGM, "gpu", "reset-gpu"},
	}
	for _, c := range cases {
		h := &results.Health{Source: "nvml", DCGM: &results.DCGM{Level: 2, Tests: []results.DCGMTest{{Name: c.name, GPU: new(1), Result: "fail", Info: c.info}}}}
		for i := 0; i < 2; i++ {
			h.GPUs = append(h.GPUs, results.GPUHealth{GPU: results.GPUInfo{Index: i, Name: "NVIDIA H200", UUID: "GPU-" + string(rune('a'+i))}})
		}
		Health(h, DefaultHealthRules())
		fl := h.GPUs[1].Flags
		if len(fl) != 1 || fl[0].Check != c.check || fl[0].Layer != c.layer || fl[0].Action != c.action || !strings.Contains(fl[0].Reason, c.name) {
			t.Errorf("DCGM %q (%q): flags %+v; want %s, %s, %s", c.name, c.info, fl, c.check, c.layer, c.action)
			continue
		}
		st, _ := gpuHealth(h.GPUs[1])
		if want := map[string]results.Status{"host": results.StatusInconclusive}[c.layer]; want != "" && st != want {
			t.Errorf("DCGM %q: the GPU %s, want %s (not proven)", c.name, st, want)
		}
	}
}
