package judge

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Verdict results.
const (
	ResultPass         = "pass"
	ResultFail         = "fail"
	ResultInconclusive = "inconclusive"
	ResultDisabled     = "disabled"
)

// GateSpec is one gate: a limit, the direction it bounds, and a factor (the aicr tolerance) that
// turns the configured figure into the threshold applied.
type GateSpec struct {
	Check  string  // stable id, e.g. "gate.ttft_p95"
	Name   string  // human name of the figure, e.g. "sync TTFT p95"
	Unit   string  // "ms", "req/s", "tok/s"
	Upper  bool    // true: value must be ≤ threshold (a latency); false: ≥ (a throughput)
	Limit  Limit   // nil Value: disabled
	Factor float64 // threshold = Limit × Factor; 0 means 1
	// FactorNote says where Factor came from, e.g. "0.9 × 50000 (aicr 10 % tolerance)".
	FactorNote string
}

// Measured is the figure a gate judges, with what the judge needs to know about its quality.
type Measured struct {
	compare.Figure
	Present bool   // false: nothing measured (no run of that kind, no samples)
	Missing string // why not present, said to the operator
}

// spec is the gate of a thresholds-table key: its check id, name, unit and direction from the table,
// with its limit in force.
func (g Gates) spec(key string) GateSpec {
	t := results.ThresholdOf(key)
	return GateSpec{Check: t.Check, Name: t.Name, Unit: t.Unit, Upper: t.Upper, Limit: *g.limit(key)}
}

// Threshold is the threshold a gate applies (Limit × Factor), or nil when the gate is disabled.
func (g GateSpec) Threshold() *float64 {
	if g.Limit.Value == nil {
		return nil
	}
	return f(*g.Limit.Value * cmp.Or(g.Factor, 1))
}

// rule is the human form of the gate, e.g. "sync TTFT p95 ≤ 200 ms".
func (g GateSpec) rule() string {
	t := g.Threshold()
	if t == nil {
		return g.Name + " (disabled)"
	}
	op := map[bool]string{true: "≤", false: "≥"}[g.Upper]
	return fmt.Sprintf("%s %s %s %s", g.Name, op, fmtNum(*t), g.Unit) + paren(g.FactorNote)
}

// JudgeGate applies one gate to one figure by compare.Gate. A disabled gate says so; a missing figure
// is inconclusive, never a silent pass.
func JudgeGate(g GateSpec, m Measured, minSamples int) results.Verdict {
	v := results.Verdict{Check: g.Check, Rule: g.rule(), Unit: g.Unit, Source: g.Limit.Source, Threshold: g.Threshold()}
	if m.Present {
		v.Value = f(m.Value)
	}
	if v.Threshold == nil {
		v.Result, v.Reason = ResultDisabled, fmt.Sprintf("%s gate disabled (%s)", g.Name, g.Limit.Source)
		return v
	}
	thr := *v.Threshold
	if !m.Present {
		v.Result, v.Reason = ResultInconclusive, fmt.Sprintf("%s not measured: %s", g.Name, m.Missing)
		return v
	}
	res, why := compare.Gate(m.Figure, thr, g.Upper, minSamples)
	within := m.Value >= thr
	if g.Upper {
		within = m.Value <= thr
	}
	rel := map[bool]string{true: ">", false: "<"}[g.Upper]
	if within {
		rel = map[bool]string{true: "≤", false: "≥"}[g.Upper]
	}
	what := fmt.Sprintf("%s %s %s %s %s %s (%s%s)%s", g.Name, fmtNum(m.Value), g.Unit, rel, fmtNum(thr), g.Unit, g.Limit.Source, samplesText(m.Samples), ciText(m.CI))
	switch res {
	case compare.Pass:
		v.Result, v.Reason = ResultPass, passText(g, m, thr)
	case compare.Inconclusive:
		v.Result, v.Reason = ResultInconclusive, what+": inconclusive, "+why
	default:
		v.Result, v.Reason = ResultFail, what+": "+advice(g)
	}
	return v
}

func samplesText(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", n=%d", n)
}

func passText(g GateSpec, m Measured, thr float64) string {
	s := fmt.Sprintf("%s %s %s within %s %s (%s)", g.Name, fmtNum(m.Value), g.Unit, fmtNum(thr), g.Unit, g.Limit.Source)
	if m.LowerBound && !g.Upper {
		s += "; the figure is a lower bound (truncated or unsaturated sweep), so the true value is higher still"
	}
	return s
}

// advice is the one thing an operator should do about a failed gate.
func advice(g GateSpec) string {
	if strings.HasPrefix(g.Limit.Source, "expected") {
		return "this GPU × model is slower than its roofline-derived expected peak: check clocks, power, PCIe link and NUMA binding; if it is healthy and this engine or profile reaches less of the roofline, calibrate a reference entry (gpuvet calibrate)"
	}
	if g.Limit.Source == SourceDefault {
		return "check the GPU's clocks, power and PCIe link; if this GPU × model is healthy but slower than the default gate, calibrate a reference entry (gpuvet calibrate)"
	}
	return "this GPU × model is slower than its configured threshold: check clocks, power, PCIe link and NUMA binding, and compare with its sibling GPUs"
}

func ciText(ci *results.Interval) string {
	if ci == nil {
		return ""
	}
	return fmt.Sprintf(", %g %% CI [%s, %s]", ci.Level*100, fmtNum(ci.Lo), fmtNum(ci.Hi))
}
