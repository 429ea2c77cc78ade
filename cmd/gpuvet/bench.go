package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
	gvterm "github.com/gpuvet/gpuvet/internal/term"
)

// benchOptions are `gpuvet bench`'s flags, turned into the load generator's options.
type benchOptions struct {
	o                     load.Options
	c                     results.LoadConfig
	promptTokens, slo     string
	maxDuration, maxRung  time.Duration
	out                   string
	progress, noScrape    bool
	prefixCount, prefixTk int
	maxErrPct             float64
	errLimit              judge.Limit
}

func newBenchCmd() *cobra.Command {
	var b benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive an OpenAI-compatible endpoint with a calibrated load and measure it",
		Long: `bench points at any OpenAI-compatible endpoint (vLLM, SGLang, trtllm-serve, Dynamo, NIM, gpuvet sim)
and measures TTFT, ITL, TPOT, E2E and throughput by the measurement rules in the README. The API key, if any, is
read from the environment variable named by --api-key-env (default OPENAI_API_KEY), never from flags.`,
		Example: `  gpuvet bench --url http://127.0.0.1:8000 --model Qwen/Qwen3-8B --profile sweep --out result.json`,
		Args:    cobra.NoArgs,
		RunE:    phases(&b),
	}
	// The profile flags default to the shared profile, as a plan's load section does.
	d := results.DefaultLoadConfig()
	f := cmd.Flags()
	f.StringVar(&b.o.URL, "url", "", "endpoint base URL, e.g. http://127.0.0.1:8000")
	f.StringVar(&b.o.Model, "model", "", "model id as the server lists it at /v1/models")
	f.StringVar(&b.o.APIKeyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key")
	f.StringVar(&b.c.Profile, "profile", d.Profile, "sweep, synchronous, concurrency, constant, poisson, throughput or trace (default trace with --workload trace, concurrency with --workload multi-turn or long-context)")
	f.IntVar(&b.c.Concurrency, "concurrency", d.Concurrency, "streams in flight (profile concurrency)")
	f.Float64Var(&b.c.Rate, "rate", 0, "requests per second (profiles constant, poisson)")
	f.IntVar(&b.c.MaxConcurrency, "max-concurrency", d.MaxConcurrency, "streams of the throughput probe (and profile throughput)")
	f.IntVar(&b.c.Rates, "rates", d.Rates, "constant-rate rungs of a sweep")
	f.DurationVar(&b.maxDuration, "max-duration", time.Duration(d.MaxDuration), "duration of each rung (none when only --max-requests is given)")
	f.DurationVar(&b.maxRung, "max-rung-duration", time.Duration(d.MaxRungDuration), "cap of a synchronous or concurrency rung that runs past --max-duration until --min-samples requests completed, and of a sweep rung that runs until its steady state (never levelled by then: transient)")
	f.DurationVar((*time.Duration)(&b.c.TimeBudget), "time-budget", time.Duration(d.TimeBudget), "what a sweep plans its rungs against: fewer constant rates (at least 5), no further knee probe, no climb or rerun when their planned lengths would pass it")
	f.IntVar(&b.c.MinSamples, "min-samples", d.MinSamples, "completed requests a synchronous or concurrency rung runs for (past --max-duration, up to --max-rung-duration)")
	f.IntVar(&b.c.MaxRequests, "max-requests", 0, "measured requests per rung (0: bounded by --max-duration only); alone, it lifts the default --max-duration")
	f.StringVar(&b.c.Warmup, "warmup", d.Warmup, "warm-up excluded from each rung: requests (1) or a duration (5s)")
	f.StringVar(&b.promptTokens, "prompt-tokens", strconv.Itoa(d.PromptTokens), "prompt length in tokens: N, or mean,stdev,min,max")
	f.IntVar(&b.c.OutputTokens, "output-tokens", d.OutputTokens, "output tokens per request (asked for exactly)")
	f.IntVar(&b.prefixCount, "prefix-count", 0, "shared-prefix prompts: number of distinct prefixes")
	f.IntVar(&b.prefixTk, "prefix-tokens", 0, "shared-prefix prompts: tokens per prefix")
	f.StringVar(&b.c.API, "api", d.API, "chat or completions")
	f.StringVar(&b.c.Reader, "reader", d.Reader, "reader of streamed responses: auto (an event loop for plain http on Linux, else net/http), eventloop or nethttp")
	f.StringVar(&b.c.Data, "data", d.Data, "prompts: synthetic, or a JSONL / ShareGPT file")
	f.StringVar(&b.c.Workload, "workload", d.Workload, "what the prompts are: "+strings.Join(load.Workloads, ", ")+" (docs/workloads.md; shared-prefix when --prefix-count and --prefix-tokens are given)")
	f.StringVar(&b.c.Trace, "trace", "", "workload trace: a Mooncake-format JSONL trace (timestamp ms, input_length, output_length, hash_ids)")
	f.IntVar(&b.c.ContextMax, "context-max", 0, "workload long-context: the ladder's top context in tokens (default: the server's max_model_len)")
	f.IntVar(&b.c.Turns, "turns", 0, "workload multi-turn: turns per session, each carrying the session's history (default 4)")
	f.Float64Var(&b.c.TraceSpeed, "trace-speed", d.TraceSpeed, "workload trace: replay this many times as fast as recorded")
	f.Int64Var(&b.c.Seed, "seed", d.Seed, "seed of prompts and Poisson arrivals")
	f.StringVar(&b.out, "out", "", "write the result JSON (results.Load) here")
	f.StringVar(&b.o.RecordsPath, "records", "", "write one JSON line per request here")
	f.StringVar(&b.slo, "slo", "", "goodput SLO, e.g. ttft=200ms,itl=50ms")
	f.BoolVar(&b.o.RetryUnsaturated, "retry-unsaturated", false, "re-run an unsaturated sweep once and keep the better curve")
	f.StringVar(&b.o.TokenizerPath, "tokenizer", "", "the model's tokenizer.json, to size prompts exactly (default: the hub cache's, else the server's /tokenize, else usage)")
	f.BoolVar(&b.progress, "progress", false, "show the progress bar even when stderr is not a terminal")
	f.BoolVar(&b.noScrape, "no-metrics", false, "do not scrape the endpoint's /metrics during the run")
	f.DurationVar(&b.o.RequestTimeout, "request-timeout", 10*time.Minute, "bound on one request")
	f.Float64Var(&b.maxErrPct, "max-error-rate-pct", *config.Defaults().Gates.MaxErrorRatePct, "exit 1 when more than this % of requests failed (errors below it are reported)")
	return cmd
}

// Complete resolves what the flags leave implicit: the prompt lengths, the run bounds, the SLO, the
// error-rate limit and its source.
func (b *benchOptions) Complete(cmd *cobra.Command, _ []string) error {
	l, err := dataset.ParseLengths(b.promptTokens)
	if err != nil {
		return usageErr("--prompt-tokens: %v", err)
	}
	c := &b.c
	c.PromptTokens, c.PromptStdev, c.PromptMin, c.PromptMax = l.Mean, l.Stdev, l.Min, l.Max
	// An explicit request budget is not cut by the default duration: only a duration the
	// user gave bounds it too (and the result says which bound ended each rung).
	if cmd.Flags().Changed("max-requests") && !cmd.Flags().Changed("max-duration") {
		b.maxDuration = 0
	}
	c.MaxDuration = results.Duration(b.maxDuration)
	c.MaxRungDuration = results.Duration(b.maxRung)
	c.PrefixCount, c.PrefixTokens = b.prefixCount, b.prefixTk
	if !cmd.Flags().Changed("workload") && c.PrefixCount > 0 && c.PrefixTokens > 0 {
		c.Workload = load.WorkloadSharedPrefix // the prefix flags alone name it
	}
	if !cmd.Flags().Changed("profile") {
		switch c.Workload {
		case load.WorkloadTrace:
			c.Profile = "trace" // a trace is replayed at its own arrival times unless a profile is asked for
		case load.WorkloadMultiTurn, load.WorkloadLongContext:
			c.Profile = "concurrency" // sessions (ladder rungs) on --concurrency streams
		}
	}
	if b.o.SLO, err = analysis.ParseSLO(b.slo); err != nil {
		return usageErr("%v", err)
	}
	b.o.Config = *c
	if b.o.TokenizerPath == "" {
		if b.o.CachedTokenizer, err = modelcache.Tokenizer("", b.o.Model); err != nil {
			fmt.Fprintf(os.Stderr, "gpuvet bench: hub cache: %v\n", err) // the server sizes prompts instead
		}
	}
	b.o.ScrapeMetrics = !b.noScrape
	b.errLimit = judge.Limit{Value: &b.maxErrPct, Unit: "%", Source: judge.SourceDefault}
	if cmd.Flags().Changed("max-error-rate-pct") {
		b.errLimit.Source = "flag"
	}
	return nil
}

// Validate checks the options before anything is sent.
func (b *benchOptions) Validate() error {
	if b.out != "" {
		if err := checkReplaceable(b.out); err != nil {
			return usageErr("--out: %v", err)
		}
	}
	if err := load.Validate(b.o); err != nil {
		return usageErr("%v", err)
	}
	if b.maxErrPct < 0 || b.maxErrPct > 100 {
		return usageErr("--max-error-rate-pct: %g; want a percentage 0..100", b.maxErrPct)
	}
	return nil
}

// Run checks the endpoint answers (exit 2 when not), runs the load, prints its table and notes,
// writes --out and exits by the error-rate verdict.
func (b *benchOptions) Run(cmd *cobra.Command) error {
	o, c := b.o, b.c
	// Plain progress lines ("rung 3/6", elapsed, time left); the load's own bar on a terminal.
	prog := gvterm.NewProgress(os.Stderr, 1, benchSteps(c), false)
	o.Log = prog.Writer(pipeline.RungLine)
	o.OnRung = func(i int, label string) { prog.Step("bench", i+1, label) }
	o.OnPlan = func(after int, left time.Duration) { prog.Plan("bench", after, left) } // the planned time left, as a run's
	if b.progress || term.IsTerminal(int(os.Stderr.Fd())) {
		o.Progress = os.Stderr
	}
	ctx, stop := interruptible(cmd.Context())
	defer stop()
	if err := load.Preflight(ctx, o); err != nil {
		return usageErr("%v", err)
	}
	defer softMemoryLimit(load.Streams(o))()
	res, runErr := load.Run(ctx, o)
	if res == nil {
		if errors.Is(runErr, load.ErrNotServing) {
			return usageErr("%v", runErr) // nothing measured: it could not start, as an unreachable endpoint
		}
		return failedErr("%v", runErr)
	}
	gvterm.Load(cmd.OutOrStdout(), res)
	for i, r := range res.Runs {
		for _, note := range []string{r.ServerReason, r.TokenBursts, r.ErrorStop, r.TransientReason()} {
			if note != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "gpuvet: rung %d (%s): %s\n", i+1, r.Kind, note)
			}
		}
	}
	printWorkload(cmd.ErrOrStderr(), res)
	if cut := load.CutByDuration(res); len(cut) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "gpuvet: rung(s) %v ended at --max-duration %s before --max-requests %d: raise --max-duration, or leave it out\n", cut, b.maxDuration, c.MaxRequests)
	}
	if b.out != "" {
		if err := results.WriteJSON(b.out, res); err != nil {
			return failedErr("--out: %v", err)
		}
	}
	errV := judge.ErrorRateVerdict(res, b.errLimit)
	if _, bad, _ := judge.ErrorCounts(res); bad > 0 && errV != nil && errV.Result != judge.ResultFail { // a failure says it on exit
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuvet:", errV.Reason)
	}
	switch {
	case res.Interrupted:
		return failedErr("interrupted: wrote what was measured")
	case runErr != nil:
		return failedErr("%v", runErr)
	case errV != nil && errV.Result == judge.ResultFail:
		return failedErr("%s", errV.Reason)
	}
	if why := judge.PrefixCacheMissing(res); why != "" {
		return failedErr("engine (%s): %s", judge.CheckPrefixCache, why)
	}
	return nil
}

// printWorkload says what a workload's own figures are: how a trace replay kept its schedule and
// lengths, and the engine's prefix-cache hits against what the workload shared.
func printWorkload(w io.Writer, res *results.Load) {
	for i, r := range res.Runs {
		if r.TTFO != nil && r.Reasoning != nil {
			fmt.Fprintf(w, "gpuvet: rung %d (%s): %d answers reasoned: time to first output token p50 %.1f ms, p99 %.1f ms (TTFT counts the first reasoning token); reasoning p50 %.1f ms\n",
				i+1, r.Kind, r.TTFO.Count, r.TTFO.P50, r.TTFO.P99, r.Reasoning.P50)
		}
		if rp := r.Replay; rp != nil {
			fmt.Fprintf(w, "gpuvet: rung %d (%s): replayed %d of %d requests over %.2f s (the trace's span %.2f s, %+.2f %%), send lag p99 %.1f ms, max %.1f ms; %d of %d prompts counted at the trace's exact length\n",
				i+1, r.Workload, rp.Sent, rp.Planned, rp.SentSpanS, rp.PlannedSpanS, rp.SpanErrorPct, rp.LagP99Ms, rp.LagMaxMs, rp.PromptsExact, rp.PromptsCounted)
		}
	}
	printContext(w, res)
	if res.Server == nil || res.Server.PrefixCache == nil {
		return
	}
	pc := res.Server.PrefixCache
	exp := "the workload shares no prefix"
	if pc.Expected != nil {
		exp = fmt.Sprintf("expected %.1f %% from the prompts sent", *pc.Expected*100)
	}
	fmt.Fprintf(w, "gpuvet: prefix cache: %.1f %% of %.0f prompt tokens hit (the engine's counters); %s\n", pc.HitRate*100, pc.QueriedTokens, exp)
}

// printContext says what a context ladder found: each rung's preemptions and KV-cache use, the
// longest clean context, and where the KV-cache size says preemption starts.
func printContext(w io.Writer, res *results.Load) {
	c := res.Context
	if c == nil {
		return
	}
	for _, r := range res.Runs {
		if r.ContextTokens == 0 {
			continue
		}
		pre := "preemptions not exported"
		if r.Preemptions != nil && r.KVUsageMax != nil {
			pre = fmt.Sprintf("%.0f preemptions, KV cache up to %.0f %%", *r.Preemptions, *r.KVUsageMax*100)
			if r.HeldShare != nil && *r.HeldShare > 0 {
				pre += fmt.Sprintf(", requests held back %.0f %% of the rung", *r.HeldShare*100)
			}
		}
		fmt.Fprintf(w, "gpuvet: context %6d tokens × %d streams: TTFT p50 %.0f ms; %s\n", r.ContextTokens, c.Concurrency, r.TTFT.P50, pre)
	}
	switch {
	case c.Note != "":
		fmt.Fprintf(w, "gpuvet: long context: %s\n", c.Note)
	case c.FirstKVBound == 0:
		fmt.Fprintf(w, "gpuvet: long context: no rung ran out of KV cache, up to %d tokens at %d streams\n", c.LongestClean, c.Concurrency)
	case c.FirstPreempting == c.FirstKVBound:
		fmt.Fprintf(w, "gpuvet: long context: served %d tokens at %d streams without preemption; %d preempted\n", c.LongestClean, c.Concurrency, c.FirstPreempting)
	default:
		fmt.Fprintf(w, "gpuvet: long context: served %d tokens at %d streams with the KV cache to spare; at %d the engine held requests back for it (no preemption)\n", c.LongestClean, c.Concurrency, c.FirstKVBound)
	}
	if c.KVCapacityTokens > 0 {
		exp := "no rung passes it"
		if c.ExpectedFirstPreempting > 0 {
			exp = fmt.Sprintf("the first rung past it is %d tokens", c.ExpectedFirstPreempting)
		}
		fmt.Fprintf(w, "gpuvet: long context: the engine's KV cache holds %d tokens (its cache_config_info): %d streams × (context + %d output) %s\n", c.KVCapacityTokens, c.Concurrency, res.Config.OutputTokens, exp)
	}
}
