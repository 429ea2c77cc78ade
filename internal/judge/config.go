package judge

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Limit is one threshold and where it came from ("default", "config:FILE", "env", "flag",
// "reference", "accelerator:NAME", "recipe:FILE"). A nil Value disables the gate it belongs to.
// It is results.Threshold, so the limits in force can be written into summary.json as they are.
type Limit = results.Threshold

// Gate keys: the names of the gates in Gates, in Override.Disable, and in the reference table.
const (
	KeyTTFTP95        = "ttft_p95_ms"
	KeyITLP95         = "itl_p95_ms"
	KeyMinThroughput  = "min_throughput_req_s"
	KeyAICRThroughput = "aicr_min_output_tok_s"
	KeyAICRTTFTP99    = "aicr_max_ttft_p99_ms"
)

// Gates are the absolute gates applied to every endpoint.
type Gates struct {
	// TTFTP95Ms: the synchronous run's TTFT p95 must be ≤ this (ms). Seed default 200.
	TTFTP95Ms Limit `yaml:"ttft_p95_ms" json:"ttft_p95_ms"`
	// ITLP95Ms: the synchronous run's ITL p95 must be ≤ this (ms). Seed default 50.
	ITLP95Ms Limit `yaml:"itl_p95_ms" json:"itl_p95_ms"`
	// MinThroughputReqS: sustained req/s of the sweep must be ≥ this. Default disabled.
	MinThroughputReqS Limit `yaml:"min_throughput_req_s" json:"min_throughput_req_s"`
	// AICRMinOutputTokS is aicr's inference-throughput X: the concurrency run's output tok/s must be
	// ≥ X × (1 − AICRTolerancePct/100). Default disabled.
	AICRMinOutputTokS Limit `yaml:"aicr_min_output_tok_s" json:"aicr_min_output_tok_s"`
	// AICRMaxTTFTP99Ms is aicr's inference-ttft-p99 Y: the concurrency run's TTFT p99 must be
	// ≤ Y × (1 + AICRTolerancePct/100). Default disabled.
	AICRMaxTTFTP99Ms Limit `yaml:"aicr_max_ttft_p99_ms" json:"aicr_max_ttft_p99_ms"`
}

// Override is a partial set of gates (a reference-table cell or an accelerator entry): a nil field
// inherits, a set field overrides, and a key listed in Disable turns that gate off.
type Override struct {
	TTFTP95Ms         *float64 `yaml:"ttft_p95_ms,omitempty" json:"ttft_p95_ms,omitempty"`
	ITLP95Ms          *float64 `yaml:"itl_p95_ms,omitempty" json:"itl_p95_ms,omitempty"`
	MinThroughputReqS *float64 `yaml:"min_throughput_req_s,omitempty" json:"min_throughput_req_s,omitempty"`
	AICRMinOutputTokS *float64 `yaml:"aicr_min_output_tok_s,omitempty" json:"aicr_min_output_tok_s,omitempty"`
	AICRMaxTTFTP99Ms  *float64 `yaml:"aicr_max_ttft_p99_ms,omitempty" json:"aicr_max_ttft_p99_ms,omitempty"`
	// Disable lists gate keys (e.g. "itl_p95_ms") this entry turns off.
	Disable []string `yaml:"disable,omitempty" json:"disable,omitempty"`
}

// Config holds every threshold the judge uses, each with its source. The config package fills it
// (recipe > env > default, then flags); DefaultConfig gives the seeds' defaults.
type Config struct {
	Gates Gates `yaml:"thresholds" json:"thresholds"`
	// Reference is keyed by the exact nvidia-smi GPU name, then the exact model id: a partial
	// override of Gates, more specific than an accelerator entry. Source "reference".
	Reference map[string]map[string]Override `yaml:"reference,omitempty" json:"reference,omitempty"`
	// AICRTolerancePct is the tolerance on the aicr gates (seed 000: 10 %).
	AICRTolerancePct Limit `yaml:"aicr_tolerance_pct" json:"aicr_tolerance_pct"`
	// AICRThroughputScope says what the aicr throughput X covers: "node" (as aicr writes it, the
	// whole node: aicr issue 1254) or "gpu". A node floor is normalized per GPU before it gates one
	// endpoint: X × endpoint GPUs ÷ node GPUs.
	AICRThroughputScope string `yaml:"aicr_throughput_scope" json:"aicr_throughput_scope"`
	// AICRNodeGPUs is the GPU count of the node the aicr floor was measured on; 0: this host's count.
	AICRNodeGPUs int `yaml:"aicr_node_gpus,omitempty" json:"aicr_node_gpus,omitempty"`
	// GPUGates, when set for an exact GPU name, are that GPU's gates already resolved by the plan
	// (global plus its accelerators entries, with sources: config.Plan.ForGPU, the one place that
	// matches accelerators); GatesFor starts from them, else from Gates.
	GPUGates map[string]Gates `yaml:"gpu_gates,omitempty" json:"gpu_gates,omitempty"`
	// LLMVariancePct and GEMMVariancePct are the GPU-to-GPU tolerances (20 %, 25 %).
	LLMVariancePct  Limit `yaml:"llm_variance_pct" json:"llm_variance_pct"`
	GEMMVariancePct Limit `yaml:"gemm_variance_pct" json:"gemm_variance_pct"`
	// Noise guards of GPU-to-GPU and baseline comparisons (30 requests, 1 req/s, 25 ms); nil disables.
	CompareMinSamples        Limit `yaml:"compare_min_samples" json:"compare_min_samples"`
	CompareMinThroughputReqS Limit `yaml:"compare_min_throughput_req_s" json:"compare_min_throughput_req_s"`
	CompareMinTTFTDeltaMs    Limit `yaml:"compare_min_ttft_delta_ms" json:"compare_min_ttft_delta_ms"`
	// BaselineTolerancePct: a metric worse than the baseline by more than this breaches (10 %).
	BaselineTolerancePct Limit `yaml:"baseline_tolerance_pct" json:"baseline_tolerance_pct"`
	// MaxErrorRatePct: a load whose failed-request share is above this fails its endpoint; any
	// failed request flags it. nil: errors only flag. The default is config's gates.max_error_rate_pct.
	MaxErrorRatePct Limit `yaml:"max_error_rate_pct" json:"max_error_rate_pct"`
	// DriftPct: a figure worse than its node's or GPU's acceptance run by more than this, with the
	// interval of the gap beyond it, is a drift (history.drift_pct; issue 47).
	DriftPct Limit `yaml:"drift_pct" json:"drift_pct"`
}

// AICR throughput scopes.
const (
	ScopeNode = "node"
	ScopeGPU  = "gpu"
)

// SourceDefault and SourceReference are the sources the judge itself writes.
const (
	SourceDefault   = "default"
	SourceReference = "reference"
)

func f(v float64) *float64 { return &v }

func def(v float64, unit string) Limit { return Limit{Value: f(v), Unit: unit, Source: SourceDefault} }

func off(unit string) Limit { return Limit{Unit: unit, Source: SourceDefault} }

// DefaultConfig returns the thresholds table's defaults, every one marked "default".
func DefaultConfig() Config {
	return Config{
		Gates: Gates{
			TTFTP95Ms:         def(defaultOf(ThTTFTP95Ms), "ms"),
			ITLP95Ms:          def(defaultOf(ThITLP95Ms), "ms"),
			MinThroughputReqS: off("req/s"),
			AICRMinOutputTokS: off("tok/s"),
			AICRMaxTTFTP99Ms:  off("ms"),
		},
		AICRTolerancePct:         def(defaultOf(ThAICRTolerancePct), "%"),
		AICRThroughputScope:      ScopeNode,
		LLMVariancePct:           def(defaultOf(ThLLMVariancePct), "%"),
		GEMMVariancePct:          def(defaultOf(ThGEMMVariancePct), "%"),
		CompareMinSamples:        def(defaultOf(ThMinSamples), "requests"),
		CompareMinThroughputReqS: def(defaultOf(ThMinThroughputReqS), "req/s"),
		CompareMinTTFTDeltaMs:    def(defaultOf(ThMinTTFTDeltaMs), "ms"),
		BaselineTolerancePct:     def(defaultOf(ThBaselineTolerance), "%"),
		MaxErrorRatePct:          def(defaultOf(ThMaxErrorRatePct), "%"),
		DriftPct:                 def(defaultOf(ThDriftPct), "%"),
	}
}

// val is a Limit's value, 0 when disabled (guards treat 0 as off).
func val(l Limit) float64 {
	if l.Value == nil {
		return 0
	}
	return *l.Value
}

// LLMGuardsFrom returns the GPU-to-GPU guards for LLM metrics from a config.
func (c Config) LLMGuardsFrom() Guards {
	return Guards{VariancePct: val(c.LLMVariancePct), MinSamples: int(val(c.CompareMinSamples)),
		MinThroughputReqS: val(c.CompareMinThroughputReqS), MinTTFTDeltaMs: val(c.CompareMinTTFTDeltaMs)}
}

// GEMMGuardsFrom returns the GPU-to-GPU guards for GEMM/PCIe figures from a config.
func (c Config) GEMMGuardsFrom() Guards { return Guards{VariancePct: val(c.GEMMVariancePct)} }

// GatesFor gives the gates for one GPU × model: the GPU's resolved gates (or the global ones),
// then the reference cell.
func (c Config) GatesFor(gpuName, model string) Gates {
	g := c.Gates
	if pre, ok := c.GPUGates[gpuName]; ok {
		g = pre
	}
	if cell, ok := c.Reference[gpuName][model]; ok {
		g = g.with(cell, SourceReference)
	}
	return g
}

// with applies a partial override, recording source on every gate it touches.
func (g Gates) with(o Override, source string) Gates {
	set := func(l *Limit, v *float64) {
		if v != nil {
			l.Value, l.Source = f(*v), source
		}
	}
	set(&g.TTFTP95Ms, o.TTFTP95Ms)
	set(&g.ITLP95Ms, o.ITLP95Ms)
	set(&g.MinThroughputReqS, o.MinThroughputReqS)
	set(&g.AICRMinOutputTokS, o.AICRMinOutputTokS)
	set(&g.AICRMaxTTFTP99Ms, o.AICRMaxTTFTP99Ms)
	for _, k := range o.Disable {
		if l := g.byKey(k); l != nil {
			l.Value, l.Source = nil, source
		}
	}
	return g
}

func (g *Gates) byKey(k string) *Limit {
	return map[string]*Limit{KeyTTFTP95: &g.TTFTP95Ms, KeyITLP95: &g.ITLP95Ms, KeyMinThroughput: &g.MinThroughputReqS,
		KeyAICRThroughput: &g.AICRMinOutputTokS, KeyAICRTTFTP99: &g.AICRMaxTTFTP99Ms}[k]
}

// Validate checks the config for values that cannot be meant; errors name the field path.
func (c Config) Validate() error {
	errs := c.limitErrors()
	for gpu, models := range c.Reference {
		for model, o := range models {
			errs = append(errs, overrideErrors(fmt.Sprintf("reference[%q][%q]", gpu, model), o)...)
		}
	}
	if c.AICRThroughputScope != "" && c.AICRThroughputScope != ScopeNode && c.AICRThroughputScope != ScopeGPU {
		errs = append(errs, fmt.Sprintf("aicr_throughput_scope: %q; want node (the recipe's floor covers the whole node) or gpu", c.AICRThroughputScope))
	}
	if c.AICRNodeGPUs < 0 {
		errs = append(errs, fmt.Sprintf("aicr_node_gpus: %d is negative; give the GPU count of the node the aicr figure was measured on, or 0", c.AICRNodeGPUs))
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs) // the checks run in map order: sorted, the message is stable
	return fmt.Errorf("judge config: %s", strings.Join(errs, "; "))
}

// limitErrors checks the global limits: none negative, the error rate a percentage, the
// tolerances set and below 100 %.
func (c Config) limitErrors() []string {
	var errs []string
	for path, l := range map[string]Limit{
		"thresholds.ttft_p95_ms": c.Gates.TTFTP95Ms, "thresholds.itl_p95_ms": c.Gates.ITLP95Ms,
		"thresholds.min_throughput_req_s": c.Gates.MinThroughputReqS, "thresholds.aicr_min_output_tok_s": c.Gates.AICRMinOutputTokS,
		"thresholds.aicr_max_ttft_p99_ms": c.Gates.AICRMaxTTFTP99Ms, "aicr_tolerance_pct": c.AICRTolerancePct,
		"llm_variance_pct": c.LLMVariancePct, "gemm_variance_pct": c.GEMMVariancePct,
		"compare_min_samples": c.CompareMinSamples, "compare_min_throughput_req_s": c.CompareMinThroughputReqS,
		"compare_min_ttft_delta_ms": c.CompareMinTTFTDeltaMs, "baseline_tolerance_pct": c.BaselineTolerancePct,
		"thresholds.max_error_rate_pct": c.MaxErrorRatePct,
	} {
		if l.Value != nil && *l.Value < 0 {
			errs = append(errs, fmt.Sprintf("%s: %g is negative; give a value ≥ 0, or null to disable", path, *l.Value))
		}
	}
	if v := c.MaxErrorRatePct.Value; v != nil && *v > 100 {
		errs = append(errs, fmt.Sprintf("thresholds.max_error_rate_pct: %g %% is above 100; give a percentage 0..100, or null for errors to only flag", *v))
	}
	// The tolerances: unset (0) would flag every difference, 100 % or more none.
	for _, t := range []struct {
		path string
		l    Limit
		def  float64 // 0: may be left unset
	}{{"llm_variance_pct", c.LLMVariancePct, DefaultLLMVariancePct}, {"gemm_variance_pct", c.GEMMVariancePct, DefaultGEMMVariancePct},
		{"aicr_tolerance_pct", c.AICRTolerancePct, 0}} {
		if t.def > 0 && (t.l.Value == nil || *t.l.Value == 0) {
			errs = append(errs, fmt.Sprintf("%s: not set; a tolerance of 0 would flag every difference (the default is %g)", t.path, t.def))
		}
		if t.l.Value != nil && *t.l.Value >= 100 {
			errs = append(errs, fmt.Sprintf("%s: %g %% would never flag; give a percentage below 100", t.path, *t.l.Value))
		}
	}
	return errs
}

// overrideErrors checks one reference override: gates it disables must exist, its limits ≥ 0.
func overrideErrors(path string, o Override) []string {
	var errs []string
	for _, k := range o.Disable {
		if (&Gates{}).byKey(k) == nil {
			errs = append(errs, fmt.Sprintf("%s.disable: unknown gate %q; use one of %s, %s, %s, %s, %s",
				path, k, KeyTTFTP95, KeyITLP95, KeyMinThroughput, KeyAICRThroughput, KeyAICRTTFTP99))
		}
	}
	for k, v := range map[string]*float64{KeyTTFTP95: o.TTFTP95Ms, KeyITLP95: o.ITLP95Ms, KeyMinThroughput: o.MinThroughputReqS,
		KeyAICRThroughput: o.AICRMinOutputTokS, KeyAICRTTFTP99: o.AICRMaxTTFTP99Ms} {
		if v != nil && *v < 0 {
			errs = append(errs, fmt.Sprintf("%s.%s: %g is negative; give a value ≥ 0", path, k, *v))
		}
	}
	return errs
}

// Thresholds lists the global limits in force by stable name, for summary.json's meta.thresholds.
func (c Config) Thresholds() map[string]results.Threshold {
	return map[string]results.Threshold{
		results.ThresholdTTFTP95: c.Gates.TTFTP95Ms, "gate." + KeyITLP95: c.Gates.ITLP95Ms,
		"gate." + KeyMinThroughput: c.Gates.MinThroughputReqS, "gate." + KeyAICRThroughput: c.Gates.AICRMinOutputTokS,
		"gate." + KeyAICRTTFTP99: c.Gates.AICRMaxTTFTP99Ms, "aicr_tolerance_pct": c.AICRTolerancePct,
		"llm_variance_pct": c.LLMVariancePct, "gemm_variance_pct": c.GEMMVariancePct,
		"compare_min_samples": c.CompareMinSamples, "compare_min_throughput_req_s": c.CompareMinThroughputReqS,
		"compare_min_ttft_delta_ms": c.CompareMinTTFTDeltaMs, results.ThresholdBaselineTolerance: c.BaselineTolerancePct,
		"gate.max_error_rate_pct": c.MaxErrorRatePct, "history.drift_pct": c.DriftPct,
	}
}
