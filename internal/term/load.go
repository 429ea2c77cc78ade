package term

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Load prints the load as a terminal table: one row per rung, then throughput, the saturation
// verdict, how counts were made, and the client self-check (loud when it tripped).
func Load(w io.Writer, l *results.Load) {
	tw := NumColumns(w)
	fmt.Fprintln(tw, "#\tprofile\ttarget\tok\terr\tcut\treq/s\tout tok/s\tTTFT p50\tTTFT p99\tITL p50\tITL p99\tTPOT p50\tE2E p50\tlag p99\t")
	for i, r := range l.Runs {
		target := fmt.Sprintf("c=%d", r.Concurrency)
		if r.TargetRate > 0 {
			target = fmt.Sprintf("%.2f/s", r.TargetRate)
		}
		mark := ""
		if r.ClientLimited {
			mark = " " + ClientLimited
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%.2f\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.0f\t%.2f\t%s\n",
			i+1, r.Kind, target, r.Requests.Successful, r.Requests.Errored, r.Requests.Incomplete, r.ReqS, r.OutputTokS,
			r.TTFT.P50, r.TTFT.P99, r.ITL.P50, r.ITL.P99, r.TPOT.P50, r.E2E.P50, r.ClientLag.P99, mark)
	}
	tw.Flush()
	fmt.Fprintln(w, "(latencies in ms; TTFT from request written to first generated token; ITL per token; cut: ended by the drain bound or a stop)")
	if waits := cpuWaits(l.Runs, func(r results.Run) *float64 { return r.EngineCPUWaitPct }); waits != "" {
		fmt.Fprintf(w, "engine CPU wait, rung by rung (the share of its runnable time its processes waited for a CPU; high, the host's CPUs set its pace): %s\n", waits)
	}
	if waits := cpuWaits(l.Runs, func(r results.Run) *float64 { return r.HostCPUPressurePct }); waits != "" {
		fmt.Fprintf(w, "host CPU pressure, rung by rung (the share of the rung some task of the engine's node waited for a CPU): %s\n", waits)
	}
	for i, r := range l.Runs {
		if len(r.Errors) > 0 {
			fmt.Fprintf(w, "rung %d errors: %s\n", i+1, results.ErrorCounts(r.Errors))
		}
		if r.LatencyFrom != "" {
			fmt.Fprintf(w, "rung %d latencies: %s\n", i+1, r.LatencyFrom)
		}
		if r.TTFTFromSchedule != nil && r.TTFTFromSchedule.P99-r.TTFT.P99 > 1 {
			fmt.Fprintf(w, "rung %d: TTFT p99 from the scheduled send is %.1f ms (%.1f ms of client delay)\n", i+1, r.TTFTFromSchedule.P99, r.TTFTFromSchedule.P99-r.TTFT.P99)
		}
	}
	fmt.Fprintf(w, "peak output %.0f tok/s; sustained %.2f req/s (peak ÷ mean output tokens/request)", l.PeakOutputTokS, l.SustainedReqS)
	if l.BurstReqS > 0 {
		fmt.Fprintf(w, "; burst %.0f req/s (1 s window, not gated)", l.BurstReqS)
	}
	fmt.Fprintln(w)
	if s := l.Saturation; s != nil {
		switch {
		case s.LowerBound():
			fmt.Fprintf(w, "saturation: LOWER BOUND — %s\n", s.Reason)
		default:
			top := 0.0
			if len(s.Rungs) > 0 {
				top = s.Rungs[len(s.Rungs)-1]
			}
			fmt.Fprintf(w, "saturation: neither truncated nor unsaturated (probe peak %.0f tok/s, top rung %.0f tok/s): throughput is a measurement, not a lower bound\n", s.Peak, top)
		}
		if l.Retried {
			fmt.Fprintf(w, "the sweep was unsaturated and ran twice; attempt %d is kept\n", l.KeptAttempt)
		}
	}
	fmt.Fprintf(w, "prompt lengths: %s; output counts: %s\n", l.TokenCounts, cmp.Or(l.OutputCounts, "none"))
	if len(l.DroppedParams) > 0 {
		fmt.Fprintf(w, "the endpoint refused %s: not sent\n", strings.Join(l.DroppedParams, ", "))
	}
	c := l.Client
	fmt.Fprintf(w, "client: lag p50 %.2f ms, p99 %.2f ms, max %.1f ms; CPU %.0f%% of one core (%d cores)\n", c.LagP50Ms, c.LagP99Ms, c.LagMaxMs, c.CPUPercent, c.Cores)
	if c.ClientLimited {
		fmt.Fprintf(w, "\n!!! %s\n\n", strings.ToUpper(c.Reason[:1])+c.Reason[1:])
	}
	if l.Server != nil {
		if l.Server.Error != "" {
			fmt.Fprintf(w, "server /metrics: %s\n", l.Server.Error)
		} else {
			var run, wait, kv float64
			for _, s := range l.Server.Samples {
				run, wait, kv = max(run, s.Running), max(wait, s.Waiting), max(kv, s.KVCacheUsage)
			}
			fmt.Fprintf(w, "server /metrics: %d samples; peak running %.0f, waiting %.0f, KV cache %.0f%%\n", len(l.Server.Samples), run, wait, 100*kv)
		}
	}
	if l.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the figures cover what ran before the stop")
	}
	if l.Error != "" {
		fmt.Fprintf(w, "error: %s\n", l.Error)
	}
}

// cpuWaits lists each rung's CPU wait as get reads it ("" when none was read).
func cpuWaits(runs []results.Run, get func(results.Run) *float64) string {
	var parts []string
	read := false
	for _, r := range runs {
		if get(r) == nil {
			parts = append(parts, "–")
			continue
		}
		read = true
		parts = append(parts, fmt.Sprintf("%.0f %%", *get(r)))
	}
	if !read {
		return ""
	}
	return strings.Join(parts, ", ")
}
