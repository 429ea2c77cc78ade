package judge

import (
	"fmt"

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
// turns the configured figure into the threshold actually applied.
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
	Value   float64
	Present bool   // false: nothing measured (no run of that kind, no samples)
	Missing string // why not present, said to the operator
	// LowerBound: the sweep was truncated or unsaturated (results.Saturation.LowerBound()).
	LowerBound bool
	// ClientLimited: the load generator, not the server, was the bottleneck.
	ClientLimited bool
	Samples       int               // sample count behind the figure (0: unknown)
	CI            *results.Interval // bootstrap confidence interval, when known
}

// Threshold is the threshold a gate applies (Limit × Factor), or nil when the gate is disabled.
func (g GateSpec) Threshold() *float64 {
	if g.Limit.Value == nil {
		return nil
	}
	fct := g.Factor
	if fct == 0 {
		fct = 1
	}
	return f(*g.Limit.Value * fct)
}

// rule is the human form of the gate, e.g. "sync TTFT p95 ≤ 200 ms".
func (g GateSpec) rule() string {
	t := g.Threshold()
	if t == nil {
		return g.Name + " (disabled)"
	}
	op := "≥"
	if g.Upper {
		op = "≤"
	}
	s := fmt.Sprintf("%s %s %s %s", g.Name, op, fmtNum(*t), g.Unit)
	if g.FactorNote != "" {
		s += " (" + g.FactorNote + ")"
	}
	return s
}

// JudgeGate applies one gate to one figure. A breach on a lower-bound sweep or a client-limited run
// is inconclusive (the seed: "SLO breaches become inconclusive"), while a pass stays a pass: a
// throughput lower bound above the floor is above it for sure, and a slow client only inflates
// latency. A disabled gate says so; a missing figure is inconclusive, never a silent pass.
func JudgeGate(g GateSpec, m Measured) results.Verdict {
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
	pass := m.Value >= thr
	if g.Upper {
		pass = m.Value <= thr
	}
	cmp := map[bool]string{true: ">", false: "<"}[g.Upper]
	what := fmt.Sprintf("%s %s %s %s %s %s (%s)%s", g.Name, fmtNum(m.Value), g.Unit, cmp, fmtNum(thr), g.Unit, g.Limit.Source, ciText(m.CI))
	switch {
	case pass:
		v.Result, v.Reason = ResultPass, passText(g, m, thr)
	case m.LowerBound:
		v.Result = ResultInconclusive
		v.Reason = what + ": inconclusive, the sweep was truncated or unsaturated so the figure is not a measurement; rerun with a longer or retried sweep"
	case m.ClientLimited:
		v.Result = ResultInconclusive
		v.Reason = what + ": inconclusive, the load generator was the bottleneck (client-limited); give it more CPU or fewer in flight and rerun"
	default:
		v.Result, v.Reason = ResultFail, what+": "+advice(g)
	}
	return v
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
