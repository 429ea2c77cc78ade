package results

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The layers a finding belongs to (Flag.Layer, Finding.Layer). A GPU is flag or failed only on
// the evidence of the first two; a model on a GPU, a host and the run take the worst of every
// layer (docs/detection.md, "Findings by layer").
const (
	// LayerInterconnect: NVLink, NVSwitch fabric, peer-to-peer copies, the PCIe link.
	LayerInterconnect = "interconnect"
	// LayerHost: the machine around the GPUs: its driver and configuration, another process on a GPU.
	LayerHost = "host"
	// LayerInfra: what gpuvet reached the host through (SSH, Kubernetes, Slurm, OpenNebula, a Job's
	// image) and the network between the client and the engine.
	LayerInfra = "infrastructure"
)

// Layers lists every layer, in the order surfaces show them.
var Layers = []string{LayerGPU, LayerInterconnect, LayerHost, LayerEngine, LayerClient, LayerInfra}

// HardwareLayer reports whether a finding of layer l is evidence about the machine itself (the
// GPU, its links, the host): the only findings that flag a GPU or that a gate acts on.
func HardwareLayer(l string) bool {
	return l == LayerGPU || l == LayerInterconnect || l == LayerHost
}

// GPULayer reports whether a finding of layer l is evidence about a GPU or its links: the only
// findings that make a GPU flag or failed.
func GPULayer(l string) bool { return l == LayerGPU || l == LayerInterconnect }

// The actions a finding asks for: one small vocabulary a fleet can act on, from the least to the
// most disruptive (Flag.Action, Finding.Action, GPUVerdict.Action, Host.Action).
const (
	ActionNone       = "none"        // nothing to do: a note
	ActionRerun      = "rerun"       // run again (after the named cause is gone); nothing is wrong with the hardware yet
	ActionFixEngine  = "fix-engine"  // fix the engine or its configuration (version, flags, image, plan)
	ActionCalibrate  = "calibrate"   // the yardstick does not fit this GPU × model: `gpuvet calibrate` or set the gate
	ActionResetGPU   = "reset-gpu"   // drain the GPU's work and reset it (nvidia-smi -r), then vet it again
	ActionRebootNode = "reboot-node" // drain the node and reboot it, then vet it again
	ActionDrainRMA   = "drain-rma"   // drain the GPU or node and return it for repair
)

// Actions lists the vocabulary, least disruptive first.
var Actions = []string{ActionNone, ActionRerun, ActionFixEngine, ActionCalibrate, ActionResetGPU, ActionRebootNode, ActionDrainRMA}

// ActionWords are each action in words, for the terminal, the report and a drain reason.
var ActionWords = map[string]string{
	ActionNone:       "nothing to do",
	ActionRerun:      "run again",
	ActionFixEngine:  "fix the engine or its configuration",
	ActionCalibrate:  "calibrate the gate for this GPU and model",
	ActionResetGPU:   "reset the GPU",
	ActionRebootNode: "reboot the node",
	ActionDrainRMA:   "drain and return for repair (RMA)",
}

// MoreDisruptive returns the more disruptive of two actions ("" ranks below none).
func MoreDisruptive(a, b string) string {
	if slices.Index(Actions, b) > slices.Index(Actions, a) {
		return b
	}
	return a
}

// Finding is one check's outcome that did not pass, with its layer and the action it asks for:
// the one judged model every surface renders.
type Finding struct {
	Layer  string `json:"layer"`
	Status Status `json:"status"` // failed, flag or inconclusive
	Host   string `json:"host,omitempty"`
	// GPUs are the GPUs it is about (none: the host, the endpoint's engine as a whole, the run).
	GPUs    []int  `json:"gpus,omitempty"`
	Subject string `json:"subject"`
	Check   string `json:"check"`
	Reason  string `json:"reason"`
	Action  string `json:"action"`
}

// Line is the finding in one line, as the terminal, JUnit and CTRF say it: "engine failed · fix the
// engine or its configuration: [judge.engine_fault] Qwen/Qwen3-8B on gpu 1: …".
func (f Finding) Line() string {
	on := f.Subject
	if f.Host != "" && !strings.Contains(on, f.Host) {
		on = f.Host + ": " + on
	}
	return fmt.Sprintf("%s %s · %s: [%s] %s: %s", f.Layer, f.Status, ActionWords[f.Action], f.Check, on, f.Reason)
}

// LayerLine says a judged summary's layers in one line, worst first: "engine failed, gpu ok"
// ("" when nothing was found).
func LayerLine(layers map[string]Status) string {
	ls := slices.Collect(maps.Keys(layers))
	slices.SortStableFunc(ls, func(a, b string) int {
		return cmp.Or(rank(layers[b])-rank(layers[a]), slices.Index(Layers, a)-slices.Index(Layers, b))
	})
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l + " " + string(layers[l])
	}
	return strings.Join(parts, ", ")
}

// GateStatus is what a gate, a drain or a taint acts on: the host's hardware status (an engine,
// client or infrastructure failure proves nothing about it), or its status in an older summary.
func (h *Host) GateStatus() Status {
	if h.HardwareStatus != "" {
		return h.HardwareStatus
	}
	return h.Status
}

// AllFlags lists every flag of a host once: its own, its health phase's and GPUs', then its models'
// and their endpoints'.
func (h *Host) AllFlags() []Flag {
	out := append([]Flag(nil), h.Flags...)
	if h.Health != nil {
		out = append(out, h.Health.Flags...)
		for _, g := range h.Health.GPUs {
			out = append(out, g.Flags...)
		}
	}
	for _, m := range h.Models {
		out = append(out, m.Flags...)
		for _, ep := range m.Endpoints {
			out = append(out, ep.Flags...)
		}
	}
	return out
}
