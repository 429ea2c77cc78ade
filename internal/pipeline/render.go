package pipeline

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Render prints the run's outcome for the terminal: one line per endpoint with the figures the
// gates look at, then every flag with its reason, then caveats. summary.json has everything.
func Render(w io.Writer, s *results.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tGPU\tSTATUS\tSYNC TTFT p95\tSYNC ITL p95\tPEAK tok/s\t% SOL\tSUSTAINED req/s\tPOWER mean\ttok/J\tAPI SUITE\tREADY IN")
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			if len(m.Endpoints) == 0 {
				fmt.Fprintf(tw, "%s\t-\t%s\t%s\n", m.Model, m.Status, firstLines(m.Error, 1))
			}
			for _, e := range m.Endpoints {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Model, gpuList(e.GPUs), e.Status,
					syncMs(e.Load, func(r results.Run) results.Dist { return r.TTFT }),
					syncMs(e.Load, func(r results.Run) results.Dist { return r.ITL }),
					peak(e.Load), sol(e.SpeedOfLight), sustained(e.Load), powerMean(e.Power), tokJ(e.Power), suite(e.Functional),
					fmt.Sprintf("%.1f s", e.ProvisionSeconds))
			}
		}
	}
	tw.Flush()
	var flags []string
	add := func(fl []results.Flag) {
		for _, f := range fl {
			flags = append(flags, fmt.Sprintf("  [%s] %s: %s", f.Check, f.Subject, f.Reason))
		}
	}
	add(s.Flags)
	for _, h := range s.Hosts {
		add(h.Flags)
		if h.Health != nil {
			add(h.Health.Flags)
			for _, g := range h.Health.GPUs {
				add(g.Flags)
			}
		}
		for _, m := range h.Models {
			add(m.Flags)
			for _, e := range m.Endpoints {
				add(e.Flags)
				if e.Error != "" {
					flags = append(flags, fmt.Sprintf("  [failed] %s on gpu %s: %s", m.Model, gpuList(e.GPUs), firstLines(e.Error, 1)))
				}
			}
		}
	}
	if len(flags) > 0 {
		fmt.Fprintln(w, "\nFlags and failures")
		fmt.Fprintln(w, strings.Join(dedup(flags), "\n"))
	}
	if len(s.Caveats) > 0 {
		fmt.Fprintln(w, "\nCaveats")
		for _, c := range s.Caveats {
			fmt.Fprintln(w, "  "+c)
		}
	}
}

func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func gpuList(g []int) string {
	if len(g) == 0 {
		return "-"
	}
	p := make([]string, len(g))
	for i, x := range g {
		p[i] = fmt.Sprint(x)
	}
	return strings.Join(p, ",")
}

func syncMs(l *results.Load, pick func(results.Run) results.Dist) string {
	if l == nil {
		return "-"
	}
	for _, r := range l.Runs {
		if r.Kind == "synchronous" {
			d := pick(r)
			if d.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f ms (n=%d)", d.P95, d.Count)
		}
	}
	return "-"
}

func peak(l *results.Load) string {
	if l == nil || l.PeakOutputTokS == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.0f", l.PeakOutputTokS)
	if l.Saturation.LowerBound() {
		s += " (≥, lower bound)"
	}
	return s
}

// sol is the measured peak as % of the roofline bound at the batch the engine ran, and the bound.
func sol(s *results.SpeedOfLight) string {
	if s == nil || s.BoundOutputTokS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% of %.0f (b=%.0f, %s)", s.Percent, s.BoundOutputTokS, s.Batch, s.Limit)
}

func sustained(l *results.Load) string {
	if l == nil || l.SustainedReqS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", l.SustainedReqS)
}

func powerMean(p *results.Power) string {
	if p == nil || p.MeanW == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f W", p.MeanW)
}

func tokJ(p *results.Power) string {
	if p == nil || p.TokensPerJoule == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", p.TokensPerJoule)
}

func suite(f *results.Functional) string {
	if f == nil {
		return "-"
	}
	n := 0
	for _, t := range f.Tests {
		if t.Passed {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(f.Tests))
}
