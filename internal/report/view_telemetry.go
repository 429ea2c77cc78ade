package report

import (
	"fmt"
	"html/template"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The GPUs' own telemetry under the load (issue 33): one chart per GPU, its SM and memory clocks
// and power as shares of their maximum, temperature in °C, and whether a hardware clock-event
// reason was active, against the load's time with each rung's measured window marked.

// hwReasonMask is the hardware clock-event reasons (gpu.FailureMask: HW slowdown, SW and HW
// thermal, HW power brake); sw_power_cap is a loaded GPU at its limit.
const hwReasonMask = 0x8 | 0x20 | 0x40 | 0x80

// telemetryCharts draws one chart per GPU of the model's endpoints. maxClock is each GPU's
// maximum SM clock (0: the highest sampled), limit its power limit (0: the highest sampled).
func telemetryCharts(m results.Model, maxClock map[int]int, limit float64) []template.HTML {
	var out []template.HTML
	for _, e := range m.Endpoints {
		if e.Telemetry == nil {
			continue
		}
		for _, gt := range e.Telemetry.GPUs {
			if c := telemetryChart(gt, e.Load, maxClock[gt.GPU], limit); c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}

func telemetryChart(gt results.GPUTelemetry, ld *results.Load, maxClk int, limit float64) template.HTML {
	if len(gt.Samples) == 0 {
		return ""
	}
	clk, mem, pw := float64(maxClk), 0.0, limit
	for _, s := range gt.Samples {
		if maxClk == 0 {
			clk = max(clk, float64(s.SMClockMHz))
		}
		mem = max(mem, float64(s.MemClockMHz))
		if limit == 0 {
			pw = max(pw, s.PowerW)
		}
	}
	sm := Series{Name: fmt.Sprintf("SM clock, %% of %.0f MHz", clk)}
	mc := Series{Name: fmt.Sprintf("memory clock, %% of %.0f MHz", mem)}
	po := Series{Name: fmt.Sprintf("power, %% of %.0f W", pw)}
	te := Series{Name: "temperature, °C"}
	hw := Series{Name: "hardware clock-event reason active (at 105)", Dashed: true}
	share := func(v, of float64) float64 {
		if of <= 0 {
			return 0
		}
		return 100 * v / of
	}
	for _, s := range gt.Samples {
		tip := fmt.Sprintf("%.1f s: SM %d MHz, memory %d MHz, %.0f W, %d °C, %d %% busy, reasons %#x", s.T, s.SMClockMHz, s.MemClockMHz, s.PowerW, s.TempC, s.UtilPct, s.ClockReasons)
		sm.Points = append(sm.Points, Point{X: s.T, Y: share(float64(s.SMClockMHz), clk), Tip: tip})
		if mem > 0 {
			mc.Points = append(mc.Points, Point{X: s.T, Y: share(float64(s.MemClockMHz), mem), Tip: tip})
		}
		po.Points = append(po.Points, Point{X: s.T, Y: share(s.PowerW, pw), Tip: tip})
		te.Points = append(te.Points, Point{X: s.T, Y: float64(s.TempC), Tip: tip})
		on := 0.0
		if s.ClockReasons&hwReasonMask != 0 {
			on = 105 // above the clock lines, which sit at 100 when not throttled
		}
		hw.Points = append(hw.Points, Point{X: s.T, Y: on, Tip: tip})
	}
	var evs []EventLine
	if ld != nil {
		for k, r := range ld.Runs {
			evs = append(evs, EventLine{X: r.WindowStartS, Label: fmt.Sprintf("R%d", k+1)})
		}
	}
	c := LineChart{Title: fmt.Sprintf("GPU %d under the load: clocks, power, temperature (R1… = rung starts)", gt.GPU),
		XLabel: "seconds since load start", YLabel: "% of max / °C", Series: []Series{sm, mc, po, te, hw}, Events: evs, YCap: 110}
	return c.SVG()
}

// maxClocks is each GPU's maximum SM clock from the host's inventory.
func maxClocks(h results.Host) map[int]int {
	out := map[int]int{}
	for _, g := range hostGPUs(h) {
		if g.MaxSMClockMHz != nil {
			out[g.Index] = *g.MaxSMClockMHz
		}
	}
	return out
}
