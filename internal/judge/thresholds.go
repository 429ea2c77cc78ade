package judge

import (
	"fmt"
	"sort"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The thresholds table (issue 29): every threshold a verdict of gpuvet's reads, with its default,
// its config key and where the default comes from. The defaults of Config (DefaultConfig) and of
// HealthRules (DefaultHealthRules) are read from it, and a test holds config's built-in defaults to
// it, so each default has one home and one stated source. Per-GPU datasheet floors are a table of
// their own (results.MicrobenchFloors, measured on H200s; docs/health-floors.md), named here by
// their key.

// Source kinds of a threshold's default.
const (
	FromSeed      = "seed"      // the public seed documents (the aicr recipe evaluator, the OpenNebula appliance)
	FromDatasheet = "datasheet" // a share of the GPU's datasheet peak
	FromMeasured  = "measured"  // measured on real hardware or this project's machines (the doc says where)
)

// Threshold keys of the table.
const (
	ThTTFTP95Ms          = "gates.ttft_p95_ms"
	ThITLP95Ms           = "gates.itl_p95_ms"
	ThAICRTolerancePct   = "gates.aicr_tolerance_pct"
	ThMaxErrorRatePct    = "gates.max_error_rate_pct"
	ThLLMVariancePct     = "compare.variance_pct"
	ThGEMMVariancePct    = "compare.gemm_variance_pct"
	ThPCIeVariancePct    = "gpuvet health --pcie-variance-pct"
	ThLinkVariancePct    = "gpuvet health --link-variance-pct"
	ThMinSamples         = "compare.min_samples"
	ThMinThroughputReqS  = "compare.min_throughput_req_s"
	ThMinTTFTDeltaMs     = "compare.min_ttft_delta_ms"
	ThBaselineTolerance  = "compare.baseline_tolerance_pct"
	ThDriftPct           = "history.drift_pct"
	ThPCIeMinGBps        = "health.pcie_min_gbs"
	ThFloors             = "reference_floors"
	ThCalibTTFTMarginPct = "gpuvet calibrate --ttft-margin"
	ThCalibThrMarginPct  = "gpuvet calibrate --throughput-margin"
	ThCalibMinMarginPct  = "gpuvet calibrate (least derived compare.variance_pct)"
	ThHealthySOLSim      = "healthy % SOL (engine sim)"
	ThEngineBoundSOLPct  = "engine-bound % SOL"
)

// ThresholdSpec is one row of the table.
type ThresholdSpec struct {
	Key     string  // the config key (or flag) that sets it
	Default float64 // its default; 0 where the default is a table (floors)
	Unit    string
	Source  string // FromSeed, FromDatasheet or FromMeasured
	Where   string // which seed line, datasheet figure or measurement
}

// Thresholds is the table, in the order a reader meets them (docs/thresholds.md prints it; a test
// holds the two together). The health phase's values are read from results.DefaultHealth, their one
// home (config's defaults and the flags read it too); this table says where each comes from.
var Thresholds = []ThresholdSpec{
	{ThTTFTP95Ms, 200, "ms", FromSeed, "seed 003: sync TTFT p95 ≤ 200 ms (seed 000: interactive TTFT ~200 ms)"},
	{ThITLP95Ms, 50, "ms", FromSeed, "seed 003: sync ITL p95 ≤ 50 ms"},
	{ThAICRTolerancePct, 10, "%", FromSeed, "seed 000: the aicr evaluator applies a 10 % tolerance on its floors"},
	{ThMaxErrorRatePct, 1, "%", FromMeasured, "gpuvet's: above 1 % failed requests a GPU fails (any failed request flags it)"},
	{ThLLMVariancePct, DefaultLLMVariancePct, "%", FromMeasured, "issue 35: the interval rule's margin; the seed's 20 % below the best missed a 15 % straggler, the H200 pair measured 1.5 % apart (docs/detection.md)"},
	{ThGEMMVariancePct, results.DefaultHealth().GEMMVariancePct, "%", FromSeed, "seed 003: cublas.variance_pct 25 (GEMM and HBM figures, GPU to GPU)"},
	{ThPCIeVariancePct, results.DefaultHealth().PCIeVariancePct, "%", FromSeed, "seed 003: the cuBLAS tolerance, taken for PCIe copies"},
	{ThLinkVariancePct, results.DefaultHealth().LinkVariancePct, "%", FromSeed, "seed 003: the cuBLAS tolerance, taken for a pair's peer-copy ratio"},
	{ThMinSamples, DefaultMinSamples, "requests", FromSeed, "seed 003: compare_min_samples 30"},
	{ThMinThroughputReqS, DefaultMinThroughputReqS, "req/s", FromSeed, "seed 003: compare_min_throughput_req_s 1.0 (the 2 × T4 3-vs-4 requests case)"},
	{ThMinTTFTDeltaMs, DefaultMinTTFTDeltaMs, "ms", FromSeed, "seed 003: compare_min_ttft_delta_ms 25"},
	{ThBaselineTolerance, DefaultBaselineTolerance, "%", FromSeed, "seed 003: baremetal.baseline_tolerance_pct 10"},
	{ThDriftPct, 6, "%", FromMeasured, "a host's run-to-run noise measured under 3 % (the H200 pair, 1.5 % apart), on each of the two runs compared: above it, and below the 8 % a costly firmware update takes (issue 47)"},
	{ThPCIeMinGBps, results.DefaultHealth().MinPCIeGBps, "GB/s", FromSeed, "seed 003: pcie_bw.min_gbs 8"},
	{ThFloors, 0, "share of peak", FromDatasheet, "the lowest ratio to the datasheet peak healthy H200s measured, less 25 % (results.MicrobenchFloors; docs/health-floors.md)"},
	{ThCalibTTFTMarginPct, DefaultCalibTTFTMarginPct, "%", FromSeed, "seed 003: calibration TTFT p95 = worst + 30 %"},
	{ThCalibThrMarginPct, DefaultCalibThrMarginPct, "%", FromSeed, "seed 003: calibration throughput = worst − 25 %"},
	{ThCalibMinMarginPct, MinCalibMarginPct, "%", FromMeasured, "the H200 pair measured 1.5 % apart: a derived margin under 3 % is finer than a host's run-to-run noise"},
	{ThEngineBoundSOLPct, 25, "% of the roofline", FromMeasured, "issue 50: on one H200 transformers served the random Qwen3-8B at 3.2 % of its roofline with the GPU at 0.75–0.89 of its datasheet in health, the simulator's healthy engine runs at 51–55 %: a gate missed by a GPU that passed its own checks, with the engine under this share of the roofline, is the engine's (fix the engine), at or above it the gate does not fit the GPU × model (calibrate)"},
	{ThHealthySOLSim, 52, "% of the roofline", FromMeasured, "issue 42: healthy simulated H200s × Qwen3-8B at b=32 measured 51.1 % (one GPU, quick profile), 53.1 % (640/256 tokens), 55 % (four GPUs) on this project's 2-core machine; the expected peak is the bound × this, judged with compare.variance_pct"},
}

// HealthySOL is the share of the roofline bound (results.SpeedOfLight, at the profile's batch) a
// healthy engine of a kind reaches: the expected peak of a GPU × model with no reference entry is
// the bound × this share. Only kinds measured have one; a GPU served by another, with no reference
// and no peer, has its throughput not judged (inconclusive, and the run says so).
func HealthySOL(engineKind, version string) (pct float64, where string, ok bool) {
	if engineKind == "sim" && version == "gpuvet-sim" { // the simulator's own engine, not a slow one it plays
		return defaultOf(ThHealthySOLSim), "the simulator's measured healthy " + fmtNum(defaultOf(ThHealthySOLSim)) + " %", true
	}
	return 0, "", false
}

// defaultOf is a threshold's default from the table; an unknown key is a programming error.
func defaultOf(key string) float64 {
	for _, t := range Thresholds {
		if t.Key == key {
			return t.Default
		}
	}
	panic(fmt.Sprintf("judge: no threshold %q in the table", key))
}

// ThresholdTable writes the table as text lines (`gpuvet config show` and the docs can print it).
func ThresholdTable() []string {
	rows := append([]ThresholdSpec(nil), Thresholds...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Source < rows[j].Source })
	var out []string
	for _, t := range rows {
		d := fmtNum(t.Default)
		if t.Key == ThFloors {
			d = fmt.Sprint(results.MicrobenchFloors())
		}
		out = append(out, fmt.Sprintf("%-32s %-10s %-14s %-9s %s", t.Key, d, t.Unit, t.Source, t.Where))
	}
	return out
}
