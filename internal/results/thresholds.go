package results

import "fmt"

// The thresholds table: every threshold a verdict reads, declared once (config key, summary key, a
// gate's check id and direction, unit, default and its source). config, the judge, the report and
// docs/thresholds.md (held to it by a test) read it: a new gate is one row here, then the code that
// measures its figure. Per-GPU datasheet floors are a table of their own (MicrobenchFloors).

// Source kinds of a threshold's default.
const (
	FromSeed      = "seed"      // the public seed documents (the aicr recipe evaluator, the OpenNebula appliance)
	FromDatasheet = "datasheet" // a share of the GPU's datasheet peak
	FromMeasured  = "measured"  // measured on real hardware or this project's machines (the doc says where)
)

// Keys of the table: the config key (or flag) that sets each threshold.
const (
	ThTTFTP95Ms          = "gates.ttft_p95_ms"
	ThITLP95Ms           = "gates.itl_p95_ms"
	ThMinThroughputReqS  = "gates.min_throughput_req_s"
	ThAICRMinOutputTokS  = "gates.aicr_min_output_tok_s"
	ThAICRMaxTTFTP99Ms   = "gates.aicr_max_ttft_p99_ms"
	ThAICRTolerancePct   = "gates.aicr_tolerance_pct"
	ThMaxErrorRatePct    = "gates.max_error_rate_pct"
	ThLLMVariancePct     = "compare.variance_pct"
	ThGEMMVariancePct    = "compare.gemm_variance_pct"
	ThPCIeVariancePct    = "gpuvet health --pcie-variance-pct"
	ThLinkVariancePct    = "gpuvet health --link-variance-pct"
	ThMinSamples         = "compare.min_samples"
	ThCompareMinReqS     = "compare.min_throughput_req_s"
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
	Key     string // the config key (or flag) that sets it
	Summary string // its key in summary.json's meta.thresholds ("": not written there)
	// Gate is the gate's name in the reference table, an accelerators entry and a `disable:` list
	// ("ttft_p95_ms"); "" for a threshold that is not a gate.
	Gate  string
	Check string // a gate's verdict check id ("gate.ttft_p95")
	Name  string // what it judges, in a report's words ("sync TTFT p95")
	Label string // a report column's title for a gate ("TTFT p95 gate")
	Upper bool   // a gate's figure must be ≤ the limit (false: ≥)
	Unit  string
	// Default is its default; Off: the threshold is disabled unless set (Default then 0). 0 too
	// where the default is a table (floors).
	Default float64
	Off     bool
	Source  string // FromSeed, FromDatasheet or FromMeasured
	Where   string // which seed line, datasheet figure or measurement
}

// Thresholds is the table, in the order a reader meets them (docs/thresholds.md prints it).
var Thresholds = []ThresholdSpec{
	{Key: ThTTFTP95Ms, Summary: "gate.ttft_p95_ms", Gate: "ttft_p95_ms", Check: "gate.ttft_p95", Name: "sync TTFT p95", Label: "TTFT p95 gate", Upper: true,
		Unit: "ms", Default: 200, Source: FromSeed, Where: "seed 003: sync TTFT p95 ≤ 200 ms (seed 000: interactive TTFT ~200 ms)"},
	{Key: ThITLP95Ms, Summary: "gate.itl_p95_ms", Gate: "itl_p95_ms", Check: "gate.itl_p95", Name: "sync ITL p95", Label: "ITL p95 gate", Upper: true,
		Unit: "ms", Default: 50, Source: FromSeed, Where: "seed 003: sync ITL p95 ≤ 50 ms"},
	{Key: ThMinThroughputReqS, Summary: "gate.min_throughput_req_s", Gate: "min_throughput_req_s", Check: "gate.sustained_req_s", Name: "sustained req/s", Label: "req/s floor",
		Unit: "req/s", Off: true, Source: FromSeed, Where: "seed 003: a floor set per GPU × model (the reference table, `gpuvet calibrate`); off by default"},
	{Key: ThAICRMinOutputTokS, Summary: "gate.aicr_min_output_tok_s", Gate: "aicr_min_output_tok_s", Check: "gate.aicr_throughput", Name: "concurrency-run output tok/s", Label: "aicr tok/s gate",
		Unit: "tok/s", Off: true, Source: FromSeed, Where: "seed 000: the aicr recipe's inference-throughput X; set by a recipe"},
	{Key: ThAICRMaxTTFTP99Ms, Summary: "gate.aicr_max_ttft_p99_ms", Gate: "aicr_max_ttft_p99_ms", Check: "gate.aicr_ttft_p99", Name: "concurrency-run TTFT p99", Label: "aicr TTFT p99 gate", Upper: true,
		Unit: "ms", Off: true, Source: FromSeed, Where: "seed 000: the aicr recipe's inference-ttft-p99 Y; set by a recipe"},
	{Key: ThAICRTolerancePct, Summary: "aicr_tolerance_pct", Unit: "%", Default: 10, Source: FromSeed,
		Where: "seed 000: the aicr evaluator applies a 10 % tolerance on its floors"},
	{Key: ThMaxErrorRatePct, Summary: "gate.max_error_rate_pct", Unit: "%", Default: 1, Source: FromMeasured,
		Where: "gpuvet's: above 1 % failed requests a GPU fails (any failed request flags it)"},
	{Key: ThLLMVariancePct, Summary: "llm_variance_pct", Unit: "%", Default: 10, Source: FromMeasured,
		Where: "issue 35: the interval rule's margin; the seed's 20 % below the best missed a 15 % straggler, the H200 pair measured 1.5 % apart (docs/detection.md)"},
	{Key: ThGEMMVariancePct, Summary: "gemm_variance_pct", Unit: "%", Default: 25, Source: FromSeed,
		Where: "seed 003: cublas.variance_pct 25 (GEMM and HBM figures, GPU to GPU)"},
	{Key: ThPCIeVariancePct, Unit: "%", Default: 25, Source: FromSeed, Where: "seed 003: the cuBLAS tolerance, taken for PCIe copies"},
	{Key: ThLinkVariancePct, Unit: "%", Default: 25, Source: FromSeed, Where: "seed 003: the cuBLAS tolerance, taken for a pair's peer-copy ratio"},
	{Key: ThMinSamples, Summary: "compare_min_samples", Unit: "requests", Default: 30, Source: FromSeed, Where: "seed 003: compare_min_samples 30"},
	{Key: ThCompareMinReqS, Summary: "compare_min_throughput_req_s", Unit: "req/s", Default: 1, Source: FromSeed,
		Where: "seed 003: compare_min_throughput_req_s 1.0 (the 2 × T4 3-vs-4 requests case)"},
	{Key: ThMinTTFTDeltaMs, Summary: "compare_min_ttft_delta_ms", Unit: "ms", Default: 25, Source: FromSeed, Where: "seed 003: compare_min_ttft_delta_ms 25"},
	{Key: ThBaselineTolerance, Summary: "baseline_tolerance_pct", Unit: "%", Default: 10, Source: FromSeed, Where: "seed 003: baremetal.baseline_tolerance_pct 10"},
	{Key: ThDriftPct, Summary: "history.drift_pct", Unit: "%", Default: 6, Source: FromMeasured,
		Where: "a host's run-to-run noise measured under 3 % (the H200 pair, 1.5 % apart), on each of the two runs compared: above it, and below the 8 % a costly firmware update takes (issue 47)"},
	{Key: ThPCIeMinGBps, Summary: "pcie_min_gbs", Unit: "GB/s", Default: 8, Source: FromSeed, Where: "seed 003: pcie_bw.min_gbs 8"},
	{Key: ThFloors, Unit: "share of peak", Source: FromDatasheet,
		Where: "the lowest ratio to the datasheet peak healthy H200s measured, less 25 % (results.MicrobenchFloors; docs/health-floors.md)"},
	{Key: ThCalibTTFTMarginPct, Unit: "%", Default: 30, Source: FromSeed, Where: "seed 003: calibration TTFT p95 = worst + 30 %"},
	{Key: ThCalibThrMarginPct, Unit: "%", Default: 25, Source: FromSeed, Where: "seed 003: calibration throughput = worst − 25 %"},
	{Key: ThCalibMinMarginPct, Unit: "%", Default: 3, Source: FromMeasured,
		Where: "the H200 pair measured 1.5 % apart: a derived margin under 3 % is finer than a host's run-to-run noise"},
	{Key: ThEngineBoundSOLPct, Unit: "% of the roofline", Default: 25, Source: FromMeasured,
		Where: "issue 50: on one H200 transformers served the random Qwen3-8B at 3.2 % of its roofline with the GPU at 0.75–0.89 of its datasheet in health, the simulator's healthy engine runs at 51–55 %: a gate missed by a GPU that passed its own checks, with the engine under this share of the roofline, is the engine's (fix the engine), at or above it the gate does not fit the GPU × model (calibrate)"},
	{Key: ThHealthySOLSim, Unit: "% of the roofline", Default: 52, Source: FromMeasured,
		Where: "issue 42: healthy simulated H200s × Qwen3-8B at b=32 measured 51.1 % (one GPU, quick profile), 53.1 % (640/256 tokens), 55 % (four GPUs) on this project's 2-core machine; the expected peak is the bound × this, judged with compare.variance_pct"},
}

// ThresholdOf is the table's row for a key; an unknown key is a programming error.
func ThresholdOf(key string) ThresholdSpec {
	for _, t := range Thresholds {
		if t.Key == key {
			return t
		}
	}
	panic(fmt.Sprintf("results: no threshold %q in the table", key))
}

// DefaultOf is a threshold's default from the table (0 for one that is off by default).
func DefaultOf(key string) float64 { return ThresholdOf(key).Default }

// Gates are the table's gates (the rows with a Gate name), in its order.
func Gates() []ThresholdSpec {
	var out []ThresholdSpec
	for _, t := range Thresholds {
		if t.Gate != "" {
			out = append(out, t)
		}
	}
	return out
}

// GateByCheck is the gate whose verdicts carry check id check.
func GateByCheck(check string) (ThresholdSpec, bool) {
	for _, t := range Thresholds {
		if t.Check != "" && t.Check == check {
			return t, true
		}
	}
	return ThresholdSpec{}, false
}
