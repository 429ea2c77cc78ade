package judge

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Limit is one threshold and where it came from ("default", "config:FILE", "env", "flag",
// "reference", "accelerator:NAME", "recipe:FILE"). A nil Value disables the gate it belongs to.
// It is results.Threshold, so the limits in force can be written into summary.json as they are.
type Limit = results.Threshold

// Gates are the absolute gates applied to every endpoint; each one's direction, unit and default
// are its row of the thresholds table (results.Thresholds).
type Gates struct {
	TTFTP95Ms         Limit `yaml:"ttft_p95_ms" json:"ttft_p95_ms"`                   // sync TTFT p95
	ITLP95Ms          Limit `yaml:"itl_p95_ms" json:"itl_p95_ms"`                     // sync ITL p95
	MinThroughputReqS Limit `yaml:"min_throughput_req_s" json:"min_throughput_req_s"` // sustained req/s
	// AICRMinOutputTokS is aicr's inference-throughput X, applied as X × (1 − AICRTolerancePct/100).
	AICRMinOutputTokS Limit `yaml:"aicr_min_output_tok_s" json:"aicr_min_output_tok_s"`
	// AICRMaxTTFTP99Ms is aicr's inference-ttft-p99 Y, applied as Y × (1 + AICRTolerancePct/100).
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

// Config holds every threshold the judge uses, each with its source; the defaults are the
// thresholds table's (DefaultConfig). The config package fills it (recipe > env > default, then flags).
type Config struct {
	Gates Gates `yaml:"thresholds" json:"thresholds"`
	// Reference is keyed by the exact nvidia-smi GPU name, then the exact model id: a partial
	// override of Gates, more specific than an accelerator entry. Source "reference".
	Reference        map[string]map[string]Override `yaml:"reference,omitempty" json:"reference,omitempty"`
	AICRTolerancePct Limit                          `yaml:"aicr_tolerance_pct" json:"aicr_tolerance_pct"` // on the aicr gates
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
	// LLMVariancePct and GEMMVariancePct are the GPU-to-GPU tolerances.
	LLMVariancePct  Limit `yaml:"llm_variance_pct" json:"llm_variance_pct"`
	GEMMVariancePct Limit `yaml:"gemm_variance_pct" json:"gemm_variance_pct"`
	// Noise guards of GPU-to-GPU and baseline comparisons; nil disables.
	CompareMinSamples        Limit `yaml:"compare_min_samples" json:"compare_min_samples"`
	CompareMinThroughputReqS Limit `yaml:"compare_min_throughput_req_s" json:"compare_min_throughput_req_s"`
	CompareMinTTFTDeltaMs    Limit `yaml:"compare_min_ttft_delta_ms" json:"compare_min_ttft_delta_ms"`
	// BaselineTolerancePct: a metric worse than the baseline by more than this breaches.
	BaselineTolerancePct Limit `yaml:"baseline_tolerance_pct" json:"baseline_tolerance_pct"`
	// MaxErrorRatePct: a load whose failed-request share is above this fails its endpoint; any
	// failed request flags it. nil: errors only flag.
	MaxErrorRatePct Limit `yaml:"max_error_rate_pct" json:"max_error_rate_pct"`
	// DriftPct: a figure worse than its node's or GPU's acceptance run by more than this, with the
	// interval of the gap beyond it, is a drift (history.drift_pct; issue 47).
	DriftPct Limit `yaml:"drift_pct" json:"drift_pct"`
	// PCIeMinGBps: pinned PCIe bandwidth below this is flagged (health.pcie_min_gbs).
	PCIeMinGBps Limit `yaml:"pcie_min_gbs" json:"pcie_min_gbs"`
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

// defaultLimit is a threshold's default as the table gives it: its value (none when it is off by
// default) and unit.
func defaultLimit(key string) Limit {
	t := results.ThresholdOf(key)
	l := Limit{Unit: t.Unit, Source: SourceDefault}
	if !t.Off {
		l.Value = f(t.Default)
	}
	return l
}

// DefaultConfig returns the thresholds table's defaults, every one marked "default".
func DefaultConfig() Config {
	c := Config{AICRThroughputScope: ScopeNode}
	for _, t := range results.Thresholds {
		if l := c.limitOf(t.Key); l != nil {
			*l = defaultLimit(t.Key)
		}
	}
	return c
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
	for _, t := range results.Gates() {
		if v := o.value(t.Key); v != nil {
			l := g.limit(t.Key)
			l.Value, l.Source = f(*v), source
		}
	}
	for _, k := range o.Disable {
		if t, ok := gateNamed(k); ok {
			l := g.limit(t.Key)
			l.Value, l.Source = nil, source
		}
	}
	return g
}

// limit is the gate of a thresholds-table key (results.Th…).
func (g *Gates) limit(key string) *Limit {
	return map[string]*Limit{results.ThTTFTP95Ms: &g.TTFTP95Ms, results.ThITLP95Ms: &g.ITLP95Ms, results.ThMinThroughputReqS: &g.MinThroughputReqS,
		results.ThAICRMinOutputTokS: &g.AICRMinOutputTokS, results.ThAICRMaxTTFTP99Ms: &g.AICRMaxTTFTP99Ms}[key]
}

// value is an override's value for the gate of a thresholds-table key (nil: inherited).
func (o Override) value(key string) *float64 {
	return map[string]*float64{results.ThTTFTP95Ms: o.TTFTP95Ms, results.ThITLP95Ms: o.ITLP95Ms, results.ThMinThroughputReqS: o.MinThroughputReqS,
		results.ThAICRMinOutputTokS: o.AICRMinOutputTokS, results.ThAICRMaxTTFTP99Ms: o.AICRMaxTTFTP99Ms}[key]
}

// gateNamed is the gate a reference entry's or an accelerator's `disable:` names ("itl_p95_ms").
func gateNamed(name string) (results.ThresholdSpec, bool) {
	for _, t := range results.Gates() {
		if t.Gate == name {
			return t, true
		}
	}
	return results.ThresholdSpec{}, false
}

// gateNames lists the gates' names, for a message about an unknown one.
func gateNames() string {
	var out []string
	for _, t := range results.Gates() {
		out = append(out, t.Gate)
	}
	return strings.Join(out, ", ")
}

// limitOf is the limit in force of a thresholds-table key written to meta.thresholds (nil: the
// judge holds none for it).
func (c *Config) limitOf(key string) *Limit {
	if l := c.Gates.limit(key); l != nil {
		return l
	}
	return map[string]*Limit{results.ThAICRTolerancePct: &c.AICRTolerancePct, results.ThMaxErrorRatePct: &c.MaxErrorRatePct,
		results.ThLLMVariancePct: &c.LLMVariancePct, results.ThGEMMVariancePct: &c.GEMMVariancePct,
		results.ThMinSamples: &c.CompareMinSamples, results.ThCompareMinReqS: &c.CompareMinThroughputReqS,
		results.ThMinTTFTDeltaMs: &c.CompareMinTTFTDeltaMs, results.ThBaselineTolerance: &c.BaselineTolerancePct,
		results.ThDriftPct: &c.DriftPct, results.ThPCIeMinGBps: &c.PCIeMinGBps}[key]
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
	for _, t := range results.Thresholds {
		if l := c.limitOf(t.Key); l != nil && l.Value != nil {
			errs = appendNew(errs, badNumber(t.Key, *l.Value, "give a value ≥ 0, or null to disable"))
		}
	}
	if v := c.MaxErrorRatePct.Value; v != nil && *v > 100 {
		errs = append(errs, fmt.Sprintf("%s: %g %% is above 100; give a percentage 0..100, or null for errors to only flag", results.ThMaxErrorRatePct, *v))
	}
	// The tolerances: unset (0) would flag every difference, 100 % or more none.
	for _, t := range []struct {
		path string
		l    Limit
		def  float64 // 0: may be left unset
	}{{results.ThLLMVariancePct, c.LLMVariancePct, results.DefaultOf(results.ThLLMVariancePct)},
		{results.ThGEMMVariancePct, c.GEMMVariancePct, results.DefaultOf(results.ThGEMMVariancePct)},
		{results.ThAICRTolerancePct, c.AICRTolerancePct, 0}} {
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
		if _, ok := gateNamed(k); !ok {
			errs = append(errs, fmt.Sprintf("%s.disable: unknown gate %q; use one of %s", path, k, gateNames()))
		}
	}
	for _, t := range results.Gates() {
		if v := o.value(t.Key); v != nil {
			errs = appendNew(errs, badNumber(path+"."+t.Gate, *v, "give a value ≥ 0"))
		}
	}
	return errs
}

// badNumber is why v cannot be the limit at path ("" when it can), and what to give instead.
func badNumber(path string, v float64, instead string) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0): // YAML's .nan, .inf
		return fmt.Sprintf("%s: %g is not a number; %s", path, v, instead)
	case v < 0:
		return fmt.Sprintf("%s: %g is negative; %s", path, v, instead)
	}
	return ""
}

// Thresholds lists the limits in force by their meta.thresholds key (the thresholds table's
// Summary), for summary.json.
func (c Config) Thresholds() map[string]results.Threshold {
	out := map[string]results.Threshold{}
	for _, t := range results.Thresholds {
		if l := c.limitOf(t.Key); l != nil && t.Summary != "" {
			out[t.Summary] = *l
		}
	}
	return out
}
