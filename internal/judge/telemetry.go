package judge

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Verdicts on the GPUs' own telemetry under the load: a GPU the hardware slowed during a rung says so
// (and by how much its throughput fell), and XIDs, uncorrected ECC errors or a burst of PCIe replays
// during the load flag the GPU even when its figures pass.
const (
	CheckThrottled       = "judge.throttled"    // a rung's throughput fell while a hardware reason was active
	CheckLoadClockEvents = "judge.clock_events" // hardware clock-event reasons active during the load
	CheckLoadPowerBrake  = "judge.power_brake"  // the system's power brake active during the load: the host's
	CheckXIDLoad         = "judge.xid_under_load"
	CheckAppXIDLoad      = "judge.app_xid_under_load"    // an XID an application's fault raises as readily as the GPU's
	CheckNVLinkXIDLoad   = "judge.nvlink_xid_under_load" // an NVLink error's XID (nvlinkXIDs)
	CheckECCLoad         = "judge.ecc_under_load"
	CheckReplayLoad      = "judge.pcie_replays_under_load"
)

// hwReasons are the clock-event reasons that are the hardware's, not the workload's: DCGM's
// failure mask (gpu.FailureMask: 0x8, 0x20, 0x40, 0x80). sw_power_cap is a loaded GPU at its limit.
var hwReasons = []string{"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

// gpuOwned says whether hardware reason name, active in a rung with these shares, is the GPU's, by
// the health phase's rule (gpuClockReasons): not the power brake, nor hw_slowdown beside it without
// a thermal reason.
func gpuOwned(name string, share map[string]float64) bool {
	var on []string
	for n, sh := range share {
		if sh >= minReasonShare {
			on = append(on, n)
		}
	}
	return gpuClockReasons(results.ClockEventMask(on))&results.ClockEventMask([]string{name}) != 0
}

// appXIDs are the XIDs NVIDIA's XID catalogue answers first with "restart the application" (13
// graphics engine exception, 31 memory page fault, 43 GPU stopped processing) or ignores (45
// preemptive cleanup): an engine's bad kernel raises them as readily as a bad GPU. During the load
// they are the engine's finding and leave the GPU not proven: a rerun with a fresh engine decides.
// Any other XID is the GPU's (judge.xid_under_load).
var appXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true}

// nvlinkXIDs are the XIDs of an NVLink error (74): the interconnect's finding, not the GPU's core.
var nvlinkXIDs = map[uint64]bool{74: true}

// xidLayer is whose an XID is, wherever it is read (the load's telemetry, the kernel log, an
// engine's words): the engine's for an application's (appXIDs), the interconnect's for NVLink's,
// else the GPU's.
func xidLayer(xid uint64) string {
	switch {
	case appXIDs[xid]:
		return results.LayerEngine
	case nvlinkXIDs[xid]:
		return results.LayerInterconnect
	}
	return results.LayerGPU
}

// xidLoadChecks are the load's XID checks by the XID's layer (xidLayer).
var xidLoadChecks = map[string]string{results.LayerEngine: CheckAppXIDLoad, results.LayerInterconnect: CheckNVLinkXIDLoad, results.LayerGPU: CheckXIDLoad}

// Thresholds of the telemetry verdicts.
const (
	// fellPct: a rung this much below the rung before it "fell".
	fellPct = 5.0
	// minReasonShare: a reason active in less of a rung's samples is a blip, not a throttle.
	minReasonShare = 0.10
	// maxReplays: PCIe replays that grew more than this during one load are a marginal link.
	maxReplays = 100
)

// telemetryFlags judges one endpoint's telemetry, after the GPU-to-GPU comparisons so a throttled
// GPU's flag explains its gap.
func telemetryFlags(model string, ep *results.Endpoint) {
	if ep.Telemetry == nil {
		return
	}
	flag := func(check, reason string) {
		ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subject(model, ep), Check: check, Reason: reason})
	}
	gap := slices.ContainsFunc(ep.Flags, func(f results.Flag) bool { return f.Check == CheckGPUToGPU })
	for _, gt := range ep.Telemetry.GPUs {
		if r := throttleReason(gt, gap); r != "" {
			flag(CheckLoadClockEvents, fmt.Sprintf("gpu %d: %s", gt.GPU, r))
		}
		if r := brakeReason(gt); r != "" {
			flag(CheckLoadPowerBrake, fmt.Sprintf("gpu %d: %s", gt.GPU, r))
		}
		if ep.Load != nil {
			for _, r := range fellReasons(gt, ep.Load.Runs) {
				flag(CheckThrottled, fmt.Sprintf("gpu %d: %s", gt.GPU, r))
			}
		}
		xids := map[string][]string{} // by check: an application's fault raises it (appXIDs), NVLink's, the GPU's
		for _, x := range gt.XIDs {
			w := fmt.Sprintf("XID %d at %s%s", x.XID, x.Time.Format("15:04:05"), paren(x.Note))
			c := xidLoadChecks[xidLayer(x.XID)]
			xids[c] = append(xids[c], w)
		}
		if l := xids[CheckXIDLoad]; len(l) > 0 {
			flag(CheckXIDLoad, fmt.Sprintf("gpu %d: %s during the load: read `dmesg | grep -i xid` and act on NVIDIA's XID guidance, whatever the figures say", gt.GPU, strings.Join(l, ", ")))
		}
		if l := xids[CheckNVLinkXIDLoad]; len(l) > 0 {
			flag(CheckNVLinkXIDLoad, fmt.Sprintf("gpu %d: %s during the load: an NVLink error: read `nvidia-smi nvlink -e -i %d` for the link's error counters, reset the GPU, and if it recurs reseat or service the link (the GPU, its NVSwitch tray or bridge)", gt.GPU, strings.Join(l, ", "), gt.GPU))
		}
		if l := xids[CheckAppXIDLoad]; len(l) > 0 {
			flag(CheckAppXIDLoad, fmt.Sprintf("gpu %d: %s during the load: an XID NVIDIA answers first by restarting the application, which the engine's own fault raises as readily as the GPU's; rerun with a fresh engine, and if it comes back on this GPU and not its siblings, reset the GPU", gt.GPU, strings.Join(l, ", ")))
		}
		if d := gt.ECCUncorrected; d != nil && *d > 0 {
			flag(CheckECCLoad, fmt.Sprintf("gpu %d: %d uncorrected ECC error(s) during the load: drain the GPU, run `dcgmi diag -r 3`, and RMA it if they recur", gt.GPU, *d))
		}
		if d := gt.PCIeReplays; d != nil && *d > maxReplays {
			flag(CheckReplayLoad, fmt.Sprintf("gpu %d: the PCIe replay counter grew by %d during the load: a marginal link (reseat the card, check the riser and `lspci -vvv` AER errors)", gt.GPU, *d))
		}
	}
}

// throttleReason says which hardware reasons were active in which rungs, and the clocks they cost.
func throttleReason(gt results.GPUTelemetry, gap bool) string {
	best, worst := 0, 0
	var parts []string
	for _, name := range hwReasons {
		var rungs []int
		lo, hi := 1.0, 0.0
		for _, rt := range gt.Rungs {
			if sh := rt.ReasonShare[name]; sh >= minReasonShare && gpuOwned(name, rt.ReasonShare) {
				rungs = append(rungs, rt.Rung+1)
				lo, hi = min(lo, sh), max(hi, sh)
			}
		}
		if len(rungs) > 0 {
			share := fmt.Sprintf("%.0f %%", 100*hi)
			if lo < hi {
				share = fmt.Sprintf("%.0f–%.0f %%", 100*lo, 100*hi)
			}
			parts = append(parts, fmt.Sprintf("%s in %s of %d (%s of each)", name, rungList(rungs), len(gt.Rungs), share))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	for _, rt := range gt.Rungs {
		throttled := slices.ContainsFunc(hwReasons, func(name string) bool {
			return rt.ReasonShare[name] >= minReasonShare && gpuOwned(name, rt.ReasonShare)
		})
		if throttled && rt.SMClockMeanMHz > 0 && (worst == 0 || rt.SMClockMeanMHz < worst) {
			worst = rt.SMClockMeanMHz
		} else if !throttled {
			best = max(best, rt.SMClockMeanMHz)
		}
	}
	r := "hardware clock-event reasons under the load: " + strings.Join(parts, "; ")
	if worst > 0 {
		r += fmt.Sprintf("; SM clock down to %d MHz", worst)
		if best > 0 {
			r += fmt.Sprintf(" against %d MHz in the rungs without them", best)
		}
	}
	if gap {
		r += "; this explains its GPU-to-GPU gap"
	}
	return r + ": the hardware slowed the GPU (check its airflow and cooling, `nvidia-smi -q -d PERFORMANCE`)"
}

// brakeLayers gives the host the speed findings of an endpoint whose GPU the system's power brake
// slowed, during the load (judge.power_brake) or at the health phase (health.power_brake, braked: by
// GPU index; a brake that comes and goes can miss the load's samples): its gates, its gap to its
// siblings and its expected figure measure the brake as much as the GPU, so they leave the GPU not
// proven instead of flagging it for a return. What the GPU computed or reported (errors, XIDs,
// outputs) stays its own.
func brakeLayers(ep *results.Endpoint, braked map[int]bool) {
	when := ""
	switch {
	case slices.ContainsFunc(ep.Flags, func(f results.Flag) bool { return f.Check == CheckLoadPowerBrake }):
		when = "during the load (judge.power_brake)"
	case slices.ContainsFunc(ep.GPUs, func(g int) bool { return braked[g] }):
		when = "at the health phase (health.power_brake)"
	default:
		return
	}
	for i := range ep.Flags {
		f := &ep.Flags[i]
		speed := strings.HasPrefix(f.Check, checkGatePrefix) && f.Check != CheckErrorRate || f.Check == CheckGPUToGPU || f.Check == CheckExpected
		if speed && (f.Layer == "" || results.GPULayer(f.Layer)) {
			f.Layer, f.Action = results.LayerHost, results.ActionDrainRMA
			f.Reason = withoutAdvice(f.Reason) + "; not the GPU's alone: the system's power brake slowed it " + when + ": service the node's power, then vet it again"
		}
	}
}

// brakeReason says in which rungs the system's power brake was active ("" when in none).
func brakeReason(gt results.GPUTelemetry) string {
	var rungs []int
	hi := 0.0
	for _, rt := range gt.Rungs {
		if sh := rt.ReasonShare[brakeName]; sh >= minReasonShare {
			rungs = append(rungs, rt.Rung+1)
			hi = max(hi, sh)
		}
	}
	if len(rungs) == 0 {
		return ""
	}
	return fmt.Sprintf("under the load (%s of %d, up to %.0f %% of each) %s", rungList(rungs), len(gt.Rungs), 100*hi, brakeWords)
}

// rungList writes rung numbers with runs collapsed: "rungs 1–3, 5", "rung 2".
func rungList(r []int) string {
	var parts []string
	for i := 0; i < len(r); {
		j := i
		for j+1 < len(r) && r[j+1] == r[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", r[i], r[j]))
		} else {
			parts = append(parts, fmt.Sprint(r[i]))
		}
		i = j + 1
	}
	if len(r) == 1 {
		return "rung " + parts[0]
	}
	return "rungs " + strings.Join(parts, ", ")
}

// fellReasons: each rung whose output fell more than fellPct below the rung before it while a
// hardware reason was active in it (in at least minReasonShare of its samples).
func fellReasons(gt results.GPUTelemetry, runs []results.Run) []string {
	var out []string
	for _, rt := range gt.Rungs {
		k := rt.Rung
		if k < 1 || k >= len(runs) || runs[k-1].OutputTokS <= 0 {
			continue
		}
		drop := 100 * (1 - runs[k].OutputTokS/runs[k-1].OutputTokS)
		if drop < fellPct {
			continue
		}
		var on []string
		for _, name := range hwReasons {
			if sh := rt.ReasonShare[name]; sh >= minReasonShare && gpuOwned(name, rt.ReasonShare) { // a blip is not a throttle here either
				on = append(on, fmt.Sprintf("%s was active %.0f %% of the rung", name, 100*sh))
			}
		}
		if len(on) == 0 {
			continue
		}
		sort.Strings(on)
		out = append(out, fmt.Sprintf("rung %d (%s): %.0f %% below rung %d while %s", k+1, rt.Label, drop, k, strings.Join(on, " and ")))
	}
	return out
}
