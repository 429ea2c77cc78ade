package judge

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The health rules: the health phase measures and records; these rules turn its results.Health into
// flags, notes, GPU-to-GPU comparisons and statuses, with HealthRules' thresholds (the table's).

// Check ids: stable names of the health rules (results.Flag.Check).
const (
	CheckHealthCount  = "health.gpu_count"
	CheckHealthError  = "health.error" // the health phase, or a step of it on one GPU, broke
	CheckECC          = "health.ecc"
	CheckRetired      = "health.retired_pages"
	CheckRemap        = "health.remapped_rows"
	CheckPCIeWidth    = "health.pcie_width"
	CheckPCIeBW       = "health.pcie_bandwidth"
	CheckClockEvents  = "health.clock_events"
	CheckBurnClock    = "health.burn_clock_events"
	CheckPowerBrake   = "health.power_brake" // the system's power brake slowed the GPU: the host's
	CheckXID          = "health.xid"
	CheckDCGM         = "health.dcgm"
	CheckDCGMSoftware = "health.dcgm_software" // a DCGM test of the host's software (dcgmCheck)
	CheckDCGMLink     = "health.dcgm_link"     // a DCGM bandwidth test of the GPU's links (dcgmCheck)
	CheckFloor        = "health.datasheet_floor"
	CheckHealthBusy   = "health.busy"
	CheckNVLinkDown   = "health.nvlink_down"   // a link down: failure
	CheckNVLinkErrors = "health.nvlink_errors" // error counters grew during the phase: failure
	CheckNVLinkPath   = "health.nvlink_path"   // a pair on PCIe where the model ships NVLink
	CheckP2PAccess    = "health.p2p_access"    // peer access unavailable
	CheckP2PBandwidth = "health.p2p_bandwidth" // a pair's copy bandwidth low against its link
	CheckAllReduce    = "health.all_reduce"    // all-reduce bus bandwidth low against the links
	CheckLinkCompare  = "compare.link_to_link" // one pair slower than the others
)

// ClockFailureMask is DCGM's clock-event failure mask: HW slowdown, SW thermal, HW thermal, HW power
// brake. SW power cap (0x4) is not in it: a healthy GPU at full load sits at its power limit.
const ClockFailureMask = results.ClockHWSlowdown | results.ClockSWThermalSlowdown | results.ClockHWThermalSlowdown | results.ClockHWPowerBrakeSlowdown

// gpuClockReasons are the failure reasons of mask that are the GPU's. The power brake is the
// system's: a PSU or the BMC asserts it (NVML: "External Power Brake Assertion"), so returning the
// GPU for it would send a healthy card back. hw_slowdown is set with the brake, and is the brake's
// when no thermal reason is.
func gpuClockReasons(mask uint64) uint64 {
	bad := mask & ClockFailureMask
	if bad&results.ClockHWPowerBrakeSlowdown != 0 {
		bad &^= results.ClockHWPowerBrakeSlowdown
		if bad&(results.ClockSWThermalSlowdown|results.ClockHWThermalSlowdown) == 0 {
			bad &^= results.ClockHWSlowdown
		}
	}
	return bad
}

// braked says whether the system's power brake was seen on the GPU at the health phase (at
// inventory, while its benchmarks ran, or under the burn).
func braked(gh *results.GPUHealth) bool { return len(brakedWhere(gh)) > 0 }

// brakedGPUs are the GPUs of a host the power brake slowed at the health phase, by index.
func brakedGPUs(h *results.Host) map[int]bool {
	out := map[int]bool{}
	if h.Health != nil {
		for i := range h.Health.GPUs {
			out[h.Health.GPUs[i].GPU.Index] = braked(&h.Health.GPUs[i])
		}
	}
	return out
}

// brakedWhere says when the health phase saw the power brake on the GPU ("at inventory", "while
// gemm_bf16 ran", "under the burn"); none: never.
func brakedWhere(gh *results.GPUHealth) []string {
	var where []string
	if gh.GPU.ClockEvents.Mask&results.ClockHWPowerBrakeSlowdown != 0 {
		where = append(where, "at inventory")
	}
	if b := brakedBenches(gh); len(b) > 0 {
		where = append(where, "while "+strings.Join(b, ", ")+" ran")
	}
	if b := gh.Burn; b != nil && burnReasons(b)&results.ClockHWPowerBrakeSlowdown != 0 {
		where = append(where, fmt.Sprintf("under the burn (min SM clock %d MHz)", b.MinSMClockMHz))
	}
	return where
}

// brakedBenches are the benchmarks the power brake was active in.
func brakedBenches(gh *results.GPUHealth) []string {
	var out []string
	for _, b := range gh.Bench {
		if slices.Contains(b.ClockReasons, brakeName) {
			out = append(out, b.Name)
		}
	}
	return out
}

// brakeName is the power brake's clock-event reason.
const brakeName = "hw_power_brake_slowdown"

// brakeHealth gives the host the speed findings of a GPU the power brake slowed at the health
// phase: its figures under their floors and its gap to its siblings measure the brake as much as
// the GPU (as judge.power_brake does for the load's).
func brakeHealth(gh *results.GPUHealth) {
	if !braked(gh) {
		return
	}
	for i := range gh.Flags {
		if f := &gh.Flags[i]; f.Check == CheckFloor || f.Check == CheckGPUToGPU {
			f.Layer, f.Action = results.LayerHost, results.ActionDrainRMA
			f.Reason += "; not the GPU's alone: the system's power brake slowed it (health.power_brake)"
		}
	}
}

// brakeWords say what to do about the system's power brake.
const brakeWords = "the system's power brake (hw_power_brake_slowdown, asserted by a PSU or the BMC, not by the GPU) slowed the GPU: check the node's PSUs, their cabling and redundancy and the BMC's power capping (`ipmitool sdr`, `nvidia-smi -q -d PERFORMANCE`), then vet it again"

// failingChecks are the rules whose flag makes a GPU failed, not just flagged.
var failingChecks = map[string]bool{CheckNVLinkDown: true, CheckNVLinkErrors: true, CheckResults: true}

// HealthRules are the thresholds of the health rules; zero values take the thresholds table's
// defaults (DefaultHealthRules). The expected GPU count and whether a busy GPU was allowed are read
// from the result itself (results.Health.ExpectGPUs, results.Busy.Allowed).
type HealthRules struct {
	ExpectPCIeWidth int     // lanes wired by design (e.g. 8); 0: strict current-vs-max check
	MinPCIeGBps     float64 // pinned PCIe bandwidth floor
	GEMMVariancePct float64 // GPU-to-GPU tolerance of GEMM and HBM figures
	PCIeVariancePct float64 // GPU-to-GPU tolerance of PCIe figures
	MinLinkRatio    float64 // flag a peer copy or all-reduce below this share of its link's peak; 0: the peer_copy and all_reduce floors
	LinkVariancePct float64 // pair-to-pair tolerance of the copy ratio
	// Floors is the reference table's datasheet floors by exact GPU name, then benchmark;
	// FloorOverrides (--floor) apply to every GPU; what neither names takes results.MicrobenchFloors.
	Floors         map[string]map[string]float64
	FloorOverrides map[string]float64
}

// DefaultHealthRules are the thresholds table's defaults.
func DefaultHealthRules() HealthRules {
	return HealthRules{MinPCIeGBps: results.DefaultOf(results.ThPCIeMinGBps), GEMMVariancePct: results.DefaultOf(results.ThGEMMVariancePct),
		PCIeVariancePct: results.DefaultOf(results.ThPCIeVariancePct), LinkVariancePct: results.DefaultOf(results.ThLinkVariancePct)}
}

func (r *HealthRules) defaults() {
	d := DefaultHealthRules()
	for _, v := range [][2]*float64{{&r.MinPCIeGBps, &d.MinPCIeGBps}, {&r.GEMMVariancePct, &d.GEMMVariancePct},
		{&r.PCIeVariancePct, &d.PCIeVariancePct}, {&r.LinkVariancePct, &d.LinkVariancePct}} {
		if *v[0] <= 0 {
			*v[0] = *v[1]
		}
	}
}

// Floor is the least share of its datasheet peak a healthy card of gpuName measures in benchmark
// name (a results.MicrobenchNames name, or results.FloorBurn, FloorPeerCopy, FloorAllReduce):
// FloorOverrides (--floor), else the reference table (Floors), else results.MicrobenchFloors.
func (r *HealthRules) Floor(gpuName, name string) float64 {
	if v, ok := r.FloorOverrides[name]; ok {
		return v
	}
	if v, ok := r.Floors[gpuName][name]; ok {
		return v
	}
	return results.MicrobenchFloors()[name]
}

// Health judges a measured health phase in place: per-GPU flags and notes, GPU-to-GPU comparisons,
// host flags, and the status of every GPU and of the host. It may be called again on a loaded result.
func Health(h *results.Health, r HealthRules) {
	r.defaults()
	h.Flags = nil
	for i := range h.GPUs {
		h.GPUs[i].Flags = nil
		judgeGPU(&h.GPUs[i], r, h.Source)
	}
	if h.ExpectGPUs > 0 && len(h.GPUs) != h.ExpectGPUs {
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: "host", Check: CheckHealthCount,
			Reason: fmt.Sprintf("found %d GPU(s), expected %d: check `nvidia-smi -L` and dmesg for a card that fell off the bus, or fix --expect-gpus", len(h.GPUs), h.ExpectGPUs)})
	}
	judgeDCGM(h)
	judgeKernelLogHost(h)
	judgeInterconnect(h, r)
	h.Comparisons = compareHealth(h, r)
	for _, c := range h.Comparisons {
		for _, cell := range c.Values {
			if gh := gpuAt(h, cell.GPU); cell.Flagged && gh != nil {
				flagGPU(gh, CheckGPUToGPU, cell.Reason)
			}
		}
	}
	for i := range h.GPUs {
		brakeHealth(&h.GPUs[i])
	}
	// Every flag with its layer and action, as `gpuvet health` writes and a drain reason says them.
	classifyAll(h.Flags)
	st := results.StatusOK
	switch {
	case h.Disruption != "": // stopped by something outside the hardware: nothing decided
		st = results.StatusInconclusive
	case h.Error != "" || len(h.GPUs) == 0:
		st, h.Error = results.StatusFailed, cmp.Or(h.Error, "no GPU found")
	}
	for i := range h.GPUs {
		gh := &h.GPUs[i]
		classifyAll(gh.Flags)
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

// gpuAt is h's GPU of index i (nil: none): by index, not by place in h.GPUs (indexes need not be
// 0…n−1).
func gpuAt(h *results.Health, i int) *results.GPUHealth {
	if gi := slices.IndexFunc(h.GPUs, func(g results.GPUHealth) bool { return g.GPU.Index == i }); gi >= 0 {
		return &h.GPUs[gi]
	}
	return nil
}

func flagGPU(gh *results.GPUHealth, check, reason string) {
	gh.Flags = append(gh.Flags, results.Flag{Scope: "gpu", Subject: gpuSubject(gh.GPU), Check: check, Reason: reason})
}

func gpuSubject(g results.GPUInfo) string {
	if g.UUID == "" {
		return fmt.Sprintf("gpu %d", g.Index)
	}
	return fmt.Sprintf("gpu %d (%s)", g.Index, g.UUID)
}

// healthBreak is a benchmark of a GPU that could not run, or its burn that broke, with the layer of
// its words (the GPU's where they name a GPU fault, else the host's) and what it says.
type healthBreak struct{ layer, what string }

// healthBreaks are the breaks of a GPU's health phase: each fails it (gpuStatus).
func healthBreaks(gh *results.GPUHealth) []healthBreak {
	var out []healthBreak
	for _, b := range gh.Bench {
		if b.Status == results.StatusFailed {
			err := cmp.Or(b.Error, "failed")
			out = append(out, healthBreak{errorLayer("", err, results.LayerHost), fmt.Sprintf("gpu %d: %s could not run: %s", gh.GPU.Index, b.Name, err)})
		}
	}
	if gh.Burn != nil && gh.Burn.Error != "" {
		out = append(out, healthBreak{errorLayer("", gh.Burn.Error, results.LayerHost), fmt.Sprintf("gpu %d: the burn broke: %s", gh.GPU.Index, gh.Burn.Error)})
	}
	return out
}

// gpuStatus is failed by a break or a failing flag (the driver's signals that say the GPU is not
// usable as it is carry Fails too), flag by any other flag, else ok.
func gpuStatus(gh *results.GPUHealth) results.Status {
	st := results.StatusOK
	if len(healthBreaks(gh)) > 0 {
		st = results.StatusFailed
	}
	for _, f := range gh.Flags {
		st = results.Worse(st, results.StatusFlag)
		if failingFlag(f) {
			st = results.StatusFailed
		}
	}
	return st
}

type flagFunc func(check, format string, args ...any)

// judgeGPU applies the inventory, bandwidth, clock-event and burn rules to one GPU.
func judgeGPU(gh *results.GPUHealth, r HealthRules, source string) {
	g := gh.GPU
	flag := func(check, format string, args ...any) {
		gh.Flags = append(gh.Flags, results.Flag{Scope: "gpu", Subject: gpuSubject(g), Check: check, Reason: fmt.Sprintf(format, args...), Fails: failingChecks[check]})
	}
	vol, agg := deref64(g.ECC.VolatileUncorrected), deref64(g.ECC.AggregateUncorrected)
	if vol > 0 || agg > 0 {
		flag(CheckECC, "uncorrected ECC errors (volatile %d, aggregate %d): drain the GPU, run `dcgmi diag -r 3`, and RMA it if they recur", vol, agg)
	}
	if g.RetiredPagesPending != nil && *g.RetiredPagesPending {
		flag(CheckRetired, "retired pages are pending: reset the GPU (`nvidia-smi -r -i %d`) or reboot so the retirement takes effect", g.Index)
	}
	gh.Flags = append(gh.Flags, driverFlags(gh)...) // the recovery action, row remapping, fabric, kernel log
	judgePCIe(gh, r, flag)
	idle := g.ClockEvents.Mask
	if where := brakedWhere(gh); len(where) > 0 {
		flag(CheckPowerBrake, "%s, %s", strings.Join(where, ", "), brakeWords)
	}
	if bad := gpuClockReasons(idle); bad != 0 {
		flag(CheckClockEvents, "clock-event reasons %s active at inventory: check cooling, power delivery and `nvidia-smi -q -d PERFORMANCE`", strings.Join(results.ClockEventNames(bad), ", "))
	} else if other := idle &^ results.ClockGPUIdle; other != 0 {
		gh.Notes = appendNew(gh.Notes, fmt.Sprintf("at inventory, clock-event reasons other than gpu_idle: %s (worth a look if the GPU was idle)", strings.Join(results.ClockEventNames(other), ", ")))
	}
	if b := gh.Burn; b != nil {
		if bad := gpuClockReasons(burnReasons(b)); bad != 0 {
			flag(CheckBurnClock, "under the burn the GPU hit %s (min SM clock %d MHz, max %d °C): check its airflow and cooling, and `nvidia-smi -q -d PERFORMANCE`", strings.Join(results.ClockEventNames(bad), ", "), b.MinSMClockMHz, b.MaxTempC)
		}
		if burnReasons(b)&results.ClockSWPowerCap != 0 {
			gh.Notes = appendNew(gh.Notes, "sw_power_cap under the burn: expected, the GPU runs at its power limit under full GEMM load")
		}
	}
	for _, x := range g.XIDs {
		flag(CheckXID, "XID %d (%s) at %s: read `dmesg | grep -i xid` and act on NVIDIA's XID guidance", x.XID, cmp.Or(x.Note, "see NVIDIA's XID catalogue"), x.Time.Format("15:04:05"))
	}
	judgeBusyAndFloors(gh, r, flag)
	judgeResultChecks(gh, flag)
	if g.NUMANode < 0 && source != "sim" && (len(gh.Bench) > 0 || gh.Burn != nil) {
		gh.Notes = appendNew(gh.Notes, "NUMA node unknown (sysfs numa_node -1): benchmarks ran unbound")
	}
}

// burnReasons ORs the clock-event reasons of all of a burn's samples.
func burnReasons(b *results.Burn) uint64 {
	var m uint64
	for _, s := range b.Samples {
		m |= s.ClockReasons
	}
	return m
}

// pcieHint is what to do about a slow host link.
const pcieHint = "check the link's generation and width under load and its replay counter (`nvidia-smi -q -d PCIE`), the riser or slot, NUMA placement and IOMMU settings"

func judgePCIe(gh *results.GPUHealth, r HealthRules, flag flagFunc) {
	p := gh.GPU.PCIe
	switch {
	case p.WidthCurrent == 0:
		// not reported: nothing to judge (the source lists it in Unsupported)
	case r.ExpectPCIeWidth > 0 && p.WidthCurrent < r.ExpectPCIeWidth:
		flag(CheckPCIeWidth, "PCIe link x%d, below the expected x%d: reseat the card or check the riser/slot", p.WidthCurrent, r.ExpectPCIeWidth)
	case r.ExpectPCIeWidth == 0 && p.WidthMax > 0 && p.WidthCurrent < p.WidthMax:
		flag(CheckPCIeWidth, "PCIe link x%d, below the card's x%d: reseat the card or check the slot; if the slot is narrower by design, pass --expect-pcie-width %d", p.WidthCurrent, p.WidthMax, p.WidthCurrent)
	}
	if p.GenMax > 0 && p.GenCurrent > 0 && p.GenCurrent < p.GenMax {
		gh.Notes = appendNew(gh.Notes, fmt.Sprintf("PCIe gen %d of %d at inventory (an idle GPU lowers its link speed; the bandwidth test shows the loaded link)", p.GenCurrent, p.GenMax))
	}
	for _, b := range gh.Bench {
		if (b.Name == "pcie_h2d" || b.Name == "pcie_d2h") && b.Status == results.StatusOK && b.Value < r.MinPCIeGBps {
			flag(CheckPCIeBW, "%s %.1f GB/s, below the %.0f GB/s floor: %s", b.Name, b.Value, r.MinPCIeGBps, pcieHint)
		}
	}
}

// judgeDCGM turns failed DCGM tests into flags, each of its layer (dcgmCheck): on the GPU they name,
// else on the host.
func judgeDCGM(h *results.Health) {
	if h.DCGM == nil {
		return
	}
	for _, t := range h.DCGM.Tests {
		if t.Result != "fail" {
			continue
		}
		check, what := dcgmCheck(t)
		reason := fmt.Sprintf("DCGM level %d test %q failed: %s; %s", h.DCGM.Level, t.Name, cmp.Or(t.Info, "no detail given"), what)
		if t.GPU != nil {
			if gh := gpuAt(h, *t.GPU); gh != nil {
				flagGPU(gh, check, reason)
				continue
			}
		}
		h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: "host", Check: check, Reason: reason})
	}
}

// DCGM's tests of the host's software and of the GPU's links, by name (DCGM 4's, and DCGM 3's
// Deployment plugin's), lower case.
var (
	dcgmSoftwareTests = map[string]bool{"software": true, "denylist": true, "blacklist": true, "nvml library": true, "cuda main library": true,
		"cuda toolkit libraries": true, "permissions and os blocks": true, "persistence mode": true, "environmental variables": true, "graphics processes": true}
	dcgmLinkTests = map[string]bool{"pcie": true, "nvbandwidth": true, "nvlink": true}
	// dcgmGPUWords in a software test's detail are the GPU's own state it also checks (DCGM 4's
	// software test bundles the page-retirement, row-remap and inforom checks).
	dcgmGPUWords = regexp.MustCompile(`(?i)retire|remap|inforom|\becc\b`)
)

// dcgmCheck is a failed DCGM test's check (its layer and action, by the table) and what to do: a
// test of the host's software (a library, the persistence mode, permissions, another process) is
// the host's configuration, not the GPU; a bandwidth test of the PCIe or NVLink links is the
// interconnect's; every other test (memory, stress, power, diagnostic) is the GPU's.
func dcgmCheck(t results.DCGMTest) (check, what string) {
	name := strings.ToLower(strings.TrimSpace(t.Name))
	switch {
	case dcgmSoftwareTests[name] && !dcgmGPUWords.MatchString(t.Info):
		return CheckDCGMSoftware, "the host's software or configuration, not the GPU: fix what DCGM names (e.g. `nvidia-smi -pm 1`, the driver's libraries, another process on the GPU), then vet it again"
	case dcgmLinkTests[name]:
		return CheckDCGMLink, "the GPU's link: reseat the card or check the riser, slot or NVLink bridge (`nvidia-smi -q -d PCIE`, `nvidia-smi nvlink -s`), then rerun `dcgmi diag`"
	}
	return CheckDCGM, "rerun `dcgmi diag` at this level and follow its guidance"
}

// compareHealth compares GEMM, PCIe and HBM figures across the host's GPUs by the seed's rule against
// the best card; HBM, on-card like GEMM, takes the GEMM tolerance.
func compareHealth(h *results.Health, r HealthRules) []results.Compare {
	if len(h.GPUs) < 2 {
		return nil
	}
	var out []results.Compare
	for _, name := range results.MicrobenchNames() {
		v := r.GEMMVariancePct
		switch {
		case strings.HasPrefix(name, "pcie_"):
			v = r.PCIeVariancePct
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

// judgeBusyAndFloors flags a busy GPU (a note with --allow-busy) and every figure under its
// datasheet floor; a busy GPU's figures are marked and flagged, so none of them passes.
func judgeBusyAndFloors(gh *results.GPUHealth, r HealthRules, flag flagFunc) {
	marked := gh.Busy != nil && !gh.Busy.Allowed
	switch {
	case gh.Busy == nil:
	case gh.Busy.Allowed:
		gh.Notes = appendNew(gh.Notes, fmt.Sprintf("%s at the health phase; measured anyway (--allow-busy): the figures are not this GPU's alone", gh.Busy.Reason))
	default:
		flag(CheckHealthBusy, "%s at the health phase: its figures are not this GPU's alone and pass nothing; stop the other process (`nvidia-smi` lists it where this container cannot), or pass --allow-busy to measure anyway", gh.Busy.Reason)
	}
	hint := "check clocks, power cap and cooling (`nvidia-smi -q -d PERFORMANCE,POWER`), then rerun; if this GPU model measures lower when healthy, set its floor in reference_floors (`gpuvet calibrate`)"
	if gh.Busy != nil {
		hint = "the GPU was not gpuvet's alone (see the busy flag); rerun when it is idle"
	}
	for i := range gh.Bench {
		b := &gh.Bench[i]
		if b.Status != results.StatusOK && b.Status != results.StatusFlag {
			continue
		}
		b.Busy = marked
		b.Status = results.StatusOK
		if marked {
			b.Status = results.StatusFlag
		}
		if fl := r.Floor(gh.GPU.Name, b.Name); b.Ratio != nil && fl > 0 {
			b.Floor = &fl
			if *b.Ratio < fl {
				b.Status = results.StatusFlag
				flagFloor(b, fl, gh.Busy != nil, r, hint, flag)
			}
		}
	}
	if bu, fl := gh.Burn, r.Floor(gh.GPU.Name, results.FloorBurn); bu != nil && bu.Error == "" && bu.Ratio != nil && fl > 0 {
		bu.Floor = &fl
		if *bu.Ratio < fl {
			flag(CheckFloor, "burn %s TFLOP/s sustained is %s of the %s TFLOP/s BF16 datasheet peak, under its %.2f floor: %s", fmtNum(bu.TFLOPS), floorRatio(*bu.Ratio, fl), fmtNum(*bu.Peak), fl, hint)
		}
	}
}

// flagFloor flags figure b under its floor fl: the GPU's, or for a host copy on an idle GPU the
// link's (a host copy runs at the link's pace: a slow one is the link's or the host's).
func flagFloor(b *results.Microbench, fl float64, busy bool, r HealthRules, hint string, flag flagFunc) {
	check, of, why := CheckFloor, fmt.Sprintf("the %s %s datasheet peak", fmtNum(*b.Peak), b.Unit), hint
	if strings.HasPrefix(b.Name, "pcie_") && !busy {
		if b.Value < r.MinPCIeGBps {
			return // judgePCIe flagged it under the absolute floor
		}
		check, of, why = CheckPCIeBW, fmt.Sprintf("the link's %s %s peak", fmtNum(*b.Peak), b.Unit), pcieHint
	}
	flag(check, "%s %s %s is %s of %s, under its %.2f floor: %s", b.Name, fmtNum(b.Value), b.Unit, floorRatio(*b.Ratio, fl), of, fl, why)
}

// floorRatio writes r with two decimals, or three where two would read as the floor itself (0.596 < 0.60).
func floorRatio(r, floor float64) string {
	if s := fmt.Sprintf("%.2f", r); s != fmt.Sprintf("%.2f", floor) {
		return s
	}
	return fmt.Sprintf("%.3f", r)
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// HealthRulesFrom are the health rules' thresholds of a configuration: its health section, the
// GEMM tolerance and the reference floors.
func HealthRulesFrom(c config.Config) HealthRules {
	return HealthRules{ExpectPCIeWidth: c.Health.PCIeExpectedWidth, MinPCIeGBps: c.Health.PCIeMinGBs,
		GEMMVariancePct: c.Compare.GEMMVariancePct, Floors: c.ReferenceFloors}
}
