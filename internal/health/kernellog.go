package health

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// readKernelLog reads the host's kernel log when the source can (NVML on a live host: /dev/kmsg;
// the simulator: its virtual GPUs' lines) and puts each of the NVIDIA driver's lines on the GPU at
// the PCI address it names, one event per kind (and Xid) with its count; lines for an address no
// GPU has, or for none, go in h.KernelLog.Unmatched. A log it cannot read is a note, never a
// failure. It judges nothing: judge.Health does.
func readKernelLog(src gpu.Source, h *results.Health) {
	kl, ok := src.(gpu.KernelLogger)
	if !ok {
		return
	}
	text, err := kl.KernelLog()
	rec := &results.KernelLog{Source: text.Source, Records: text.Records, Truncated: text.Truncated}
	h.KernelLog = rec
	if err != nil {
		rec.Note = fmt.Sprintf("kernel log not read: %v (it needs root or CAP_SYSLOG, and in a container the host's /dev/kmsg): the driver's Xid, fallen-off-the-bus and reset lines were not checked", err)
		h.Notes = append(h.Notes, rec.Note)
		return
	}
	if text.Truncated {
		h.Notes = append(h.Notes, fmt.Sprintf("kernel log read up to its bound (%d records): older lines may be missing", text.Records))
	}
	byBus := map[string]*results.GPUHealth{}
	for i := range h.GPUs {
		if b := gpu.NormalizeBusID(h.GPUs[i].GPU.PCIBusID); b != "" {
			byBus[b] = &h.GPUs[i]
		}
	}
	for _, ev := range gpu.ParseKernelLog(text.Text) {
		if gh := byBus[ev.BusID]; gh != nil && ev.BusID != "" {
			gh.KernelLog = addKernelEvent(gh.KernelLog, ev)
			continue
		}
		rec.Unmatched = addKernelEvent(rec.Unmatched, ev)
	}
}

// addKernelEvent counts ev on the event of its address and kind (and Xid), or adds it (at most
// results.MaxKernelEvents kinds are kept).
func addKernelEvent(list []results.KernelEvent, ev results.KernelEvent) []results.KernelEvent {
	for i := range list {
		// One event per kind (an Xid 79 and "GPU has fallen off the bus" are one), per Xid for the others.
		if list[i].BusID == ev.BusID && list[i].Kind == ev.Kind && (ev.Kind != results.KernelXID || list[i].XID == ev.XID) {
			list[i].Count++
			return list
		}
	}
	if len(list) >= results.MaxKernelEvents {
		return list
	}
	ev.Count = 1
	return append(list, ev)
}
