package health

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Check ids: stable names of the health rules (results.Flag.Check).
const (
	CheckCount       = "health.gpu_count"
	CheckECC         = "health.ecc"
	CheckRetired     = "health.retired_pages"
	CheckRemap       = "health.remapped_rows"
	CheckPCIeWidth   = "health.pcie_width"
	CheckPCIeBW      = "health.pcie_bandwidth"
	CheckClockEvents = "health.clock_events"
	CheckBurnClock   = "health.burn_clock_events"
	CheckXID         = "health.xid"
	CheckDCGM        = "health.dcgm"
	CheckCompare     = "compare.gpu_to_gpu"
)

// Evaluate judges the measured health: per-GPU flags and notes, GPU-to-GPU comparisons, host flags,
// and the status of every GPU and of the host. It may be called again on a loaded result.
func Evaluate(h *results.Health, o Options) {
	o.defaults()
	h.Flags = nil
	for i := range h.GPUs {
		gh := &h.GPUs[i]
		gh.Flags = nil
		judgeGPU(gh, o, h.Source)
	}
	if o.ExpectGPUs > 0 && len(h.GPUs) != o.ExpectGPUs {
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: "host", Check: CheckCount,
			Reason: fmt.Sprintf("found %d GPU(s), expected %d: check `nvidia-smi -L` and dmesg for a card that fell off the bus, or fix --expect-gpus", len(h.GPUs), o.ExpectGPUs)})
	}
	judgeDCGM(h)
	judgeInterconnect(h, o)
	h.Comparisons = compareAll(h, o)
	for _, c := range h.Comparisons {
		for _, cell := range c.Values {
			if cell.Flagged && cell.GPU >= 0 && cell.GPU < len(h.GPUs) {
				gh := &h.GPUs[cell.GPU]
				gh.Flags = append(gh.Flags, results.Flag{Scope: "gpu", Subject: subject(gh.GPU), Check: CheckCompare, Reason: cell.Reason})
			}
		}
	}
	st := results.StatusOK
	if h.Error != "" || len(h.GPUs) == 0 {
		st = results.StatusFailed
		if h.Error == "" {
			h.Error = "no GPU found"
		}
	}
	for i := range h.GPUs {
		gh := &h.GPUs[i]
		gh.Status = gpuStatus(gh)
		st = results.Worse(st, gh.Status)
	}
	if len(h.Flags) > 0 {
		st = results.Worse(st, results.StatusFlag)
	}
	if h.DCGM != nil && h.DCGM.Status == results.StatusFailed {
		st = results.Worse(st, results.StatusFailed)
	}
	h.Status = st
}

func subject(g results.GPUInfo) string {
	if g.UUID == "" {
		return fmt.Sprintf("gpu %d", g.Index)
	}
	return fmt.Sprintf("gpu %d (%s)", g.Index, g.UUID)
}

func gpuStatus(gh *results.GPUHealth) results.Status {
	st := results.StatusOK
	for _, b := range gh.Bench {
		if b.Status == results.StatusFailed {
			st = results.StatusFailed
		}
	}
	if gh.Burn != nil && gh.Burn.Error != "" {
		st = results.StatusFailed
	}
	for _, f := range gh.Flags {
		st = results.Worse(st, results.StatusFlag)
		if failingChecks[f.Check] {
			st = results.StatusFailed
		}
	}
	return st
}

// judgeGPU applies the inventory, bandwidth, clock-event and burn rules to one GPU.
func judgeGPU(gh *results.GPUHealth, o Options, source string) {
	g := gh.GPU
	flag := func(check, format string, args ...any) {
		gh.Flags = append(gh.Flags, results.Flag{Scope: "gpu", Subject: subject(g), Check: check, Reason: fmt.Sprintf(format, args...)})
	}
	vol, agg := deref64(g.ECC.VolatileUncorrected), deref64(g.ECC.AggregateUncorrected)
	if vol > 0 || agg > 0 {
		flag(CheckECC, "uncorrected ECC errors (volatile %d, aggregate %d): drain the GPU, run `dcgmi diag -r 3`, and RMA it if they recur", vol, agg)
	}
	if g.RetiredPagesPending != nil && *g.RetiredPagesPending {
		flag(CheckRetired, "retired pages are pending: reset the GPU (`nvidia-smi -r -i %d`) or reboot so the retirement takes effect", g.Index)
	}
	if r := g.RemappedRows; r != nil {
		if r.Failure {
			flag(CheckRemap, "row remapping failed (%d uncorrectable rows remapped): the HBM has no spare rows left: RMA the GPU", r.Uncorrectable)
		} else if r.Pending {
			flag(CheckRemap, "a row remap is pending: reset the GPU (`nvidia-smi -r -i %d`) or reboot to apply it", g.Index)
		}
	}
	judgePCIe(gh, o, flag)
	idle := g.ClockEvents.Mask
	if bad := idle & gpu.FailureMask; bad != 0 {
		flag(CheckClockEvents, "clock-event reasons %s active at inventory: check cooling, power delivery and `nvidia-smi -q -d PERFORMANCE`", strings.Join(gpu.ReasonNames(bad), ", "))
	} else if other := idle &^ gpu.ReasonGPUIdle; other != 0 {
		addNote(gh, fmt.Sprintf("at inventory, clock-event reasons other than gpu_idle: %s (worth a look if the GPU was idle)", strings.Join(gpu.ReasonNames(other), ", ")))
	}
	if b := gh.Burn; b != nil {
		if bad := burnReasons(b) & gpu.FailureMask; bad != 0 {
			flag(CheckBurnClock, "under the burn the GPU hit %s (min SM clock %d MHz, max %d °C): check airflow, fans and PSU/power brake cabling", strings.Join(gpu.ReasonNames(bad), ", "), b.MinSMClockMHz, b.MaxTempC)
		}
		if burnReasons(b)&gpu.ReasonSWPowerCap != 0 {
			addNote(gh, "sw_power_cap under the burn: expected, the GPU runs at its power limit under full GEMM load")
		}
	}
	for _, x := range g.XIDs {
		note := x.Note
		if note == "" {
			note = "see NVIDIA's XID catalogue"
		}
		flag(CheckXID, "XID %d (%s) at %s: read `dmesg | grep -i xid` and act on NVIDIA's XID guidance", x.XID, note, x.Time.Format("15:04:05"))
	}
	judgeBusyAndFloors(gh, o, flag)
	judgeResultChecks(gh, flag)
	if g.NUMANode < 0 && source != "sim" && (len(gh.Bench) > 0 || gh.Burn != nil) {
		addNote(gh, "NUMA node unknown (sysfs numa_node -1): benchmarks ran unbound")
	}
}

func judgePCIe(gh *results.GPUHealth, o Options, flag func(check, format string, args ...any)) {
	p := gh.GPU.PCIe
	switch {
	case p.WidthCurrent == 0:
		// not reported: nothing to judge (the source lists it in Unsupported)
	case o.ExpectPCIeWidth > 0 && p.WidthCurrent < o.ExpectPCIeWidth:
		flag(CheckPCIeWidth, "PCIe link x%d, below the expected x%d: reseat the card or check the riser/slot", p.WidthCurrent, o.ExpectPCIeWidth)
	case o.ExpectPCIeWidth == 0 && p.WidthMax > 0 && p.WidthCurrent < p.WidthMax:
		flag(CheckPCIeWidth, "PCIe link x%d, below the card's x%d: reseat the card or check the slot; if the slot is narrower by design, pass --expect-pcie-width %d", p.WidthCurrent, p.WidthMax, p.WidthCurrent)
	}
	if p.GenMax > 0 && p.GenCurrent > 0 && p.GenCurrent < p.GenMax {
		addNote(gh, fmt.Sprintf("PCIe gen %d of %d at inventory (an idle GPU lowers its link speed; the bandwidth test shows the loaded link)", p.GenCurrent, p.GenMax))
	}
	for _, b := range gh.Bench {
		if (b.Name == "pcie_h2d" || b.Name == "pcie_d2h") && b.Status == results.StatusOK && b.Value < o.MinPCIeGBps {
			flag(CheckPCIeBW, "%s %.1f GB/s, below the %.0f GB/s floor: check link width/gen, NUMA placement and IOMMU settings", b.Name, b.Value, o.MinPCIeGBps)
		}
	}
}

// judgeDCGM turns failed DCGM tests into flags: on the GPU they name, else on the host.
func judgeDCGM(h *results.Health) {
	if h.DCGM == nil {
		return
	}
	for _, t := range h.DCGM.Tests {
		if t.Result != "fail" {
			continue
		}
		info := t.Info
		if info == "" {
			info = "no detail given"
		}
		reason := fmt.Sprintf("DCGM level %d test %q failed: %s; rerun `dcgmi diag -r %d` and follow its guidance", h.DCGM.Level, t.Name, info, h.DCGM.Level)
		if t.GPU != nil && *t.GPU >= 0 && *t.GPU < len(h.GPUs) {
			gh := &h.GPUs[*t.GPU]
			gh.Flags = append(gh.Flags, results.Flag{Scope: "gpu", Subject: subject(gh.GPU), Check: CheckDCGM, Reason: reason})
			continue
		}
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: "host", Check: CheckDCGM, Reason: reason})
	}
}

// compareAll compares GEMM, PCIe and HBM figures across the GPUs of the host. HBM is an on-card
// figure like GEMM and takes the GEMM tolerance.
func compareAll(h *results.Health, o Options) []results.Compare {
	if len(h.GPUs) < 2 {
		return nil
	}
	var out []results.Compare
	for _, name := range results.MicrobenchNames() {
		v := o.GEMMVariancePct
		switch {
		case strings.HasPrefix(name, "pcie_"):
			v = o.PCIeVariancePct
		case !strings.Contains(name, "gemm") && !strings.HasPrefix(name, "hbm_"):
			continue
		}
		var cells []compare.Cell
		for _, gh := range h.GPUs {
			for _, b := range gh.Bench {
				// A busy GPU's figures are not its own: they neither pass nor set the best.
				if b.Name == name && b.Value > 0 && b.Error == "" && !b.Busy && (b.Status == results.StatusOK || b.Status == results.StatusFlag) {
					cells = append(cells, compare.Cell{GPU: gh.GPU.Index, Figure: compare.Figure{Value: b.Value}})
				}
			}
		}
		if len(cells) >= 2 {
			out = append(out, compare.GPUs(name, cells, true, compare.Guards{VariancePct: v}))
		}
	}
	return out
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// addNote adds a note once, so Evaluate can run again on a loaded result.
func addNote(gh *results.GPUHealth, note string) {
	for _, n := range gh.Notes {
		if n == note {
			return
		}
	}
	gh.Notes = append(gh.Notes, note)
}
