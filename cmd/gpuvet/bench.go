package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/results"
)

func init() { root.AddCommand(newBenchCmd()) }

func newBenchCmd() *cobra.Command {
	var (
		o                     load.Options
		c                     results.LoadConfig
		promptTokens, slo     string
		maxDuration           time.Duration
		out                   string
		progress, noScrape    bool
		prefixCount, prefixTk int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive an OpenAI-compatible endpoint with a calibrated load and measure it",
		Long: `bench points at any OpenAI-compatible endpoint (vLLM, SGLang, trtllm-serve, Dynamo, NIM, gpuvet sim)
and measures TTFT, ITL, TPOT, E2E and throughput by the measurement rules in the README. The API key, if any, is
read from the environment variable named by --api-key-env (default OPENAI_API_KEY), never from flags.`,
		Example: `  gpuvet bench --url http://127.0.0.1:8000 --model Qwen/Qwen3-8B --profile sweep --out result.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := dataset.ParseLengths(promptTokens)
			if err != nil {
				return usageErr("--prompt-tokens: %v", err)
			}
			c.PromptTokens, c.PromptStdev, c.PromptMin, c.PromptMax = l.Mean, l.Stdev, l.Min, l.Max
			c.MaxDuration = results.Duration(maxDuration)
			c.PrefixCount, c.PrefixTokens = prefixCount, prefixTk
			if o.SLO, err = analysis.ParseSLO(slo); err != nil {
				return usageErr("%v", err)
			}
			o.Config = c
			o.ScrapeMetrics = !noScrape
			o.Log = os.Stderr
			if progress || term.IsTerminal(int(os.Stderr.Fd())) {
				o.Progress = os.Stderr
			}
			if err := load.Validate(o); err != nil {
				return usageErr("%v", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := load.Preflight(ctx, o); err != nil {
				return usageErr("%v", err)
			}
			res, runErr := load.Run(ctx, o)
			if res == nil {
				return failedErr("%v", runErr)
			}
			load.WriteTable(cmd.OutOrStdout(), res)
			if out != "" {
				if err := results.WriteJSON(out, res); err != nil {
					return failedErr("--out: %v", err)
				}
			}
			switch {
			case res.Interrupted:
				return failedErr("interrupted: wrote what was measured")
			case runErr != nil:
				return failedErr("%v", runErr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "", "endpoint base URL, e.g. http://127.0.0.1:8000")
	f.StringVar(&o.Model, "model", "", "model id as the server lists it at /v1/models")
	f.StringVar(&o.APIKeyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key")
	f.StringVar(&c.Profile, "profile", "sweep", "sweep, synchronous, concurrency, constant, poisson or throughput")
	f.IntVar(&c.Concurrency, "concurrency", 0, "streams in flight (profile concurrency)")
	f.Float64Var(&c.Rate, "rate", 0, "requests per second (profiles constant, poisson)")
	f.IntVar(&c.MaxConcurrency, "max-concurrency", 128, "streams of the throughput probe (and profile throughput)")
	f.IntVar(&c.Rates, "rates", 10, "constant-rate rungs of a sweep")
	f.DurationVar(&maxDuration, "max-duration", 20*time.Second, "duration of each rung")
	f.IntVar(&c.MaxRequests, "max-requests", 0, "measured requests per rung (0: bounded by --max-duration only)")
	f.StringVar(&c.Warmup, "warmup", "1", "warm-up excluded from each rung: requests (1) or a duration (5s)")
	f.StringVar(&promptTokens, "prompt-tokens", "512", "prompt length in tokens: N, or mean,stdev,min,max")
	f.IntVar(&c.OutputTokens, "output-tokens", 256, "output tokens per request (asked for exactly)")
	f.IntVar(&prefixCount, "prefix-count", 0, "shared-prefix prompts: number of distinct prefixes")
	f.IntVar(&prefixTk, "prefix-tokens", 0, "shared-prefix prompts: tokens per prefix")
	f.StringVar(&c.API, "api", "chat", "chat or completions")
	f.StringVar(&c.Data, "data", "synthetic", "prompts: synthetic, or a JSONL / ShareGPT file")
	f.Int64Var(&c.Seed, "seed", 1, "seed of prompts and Poisson arrivals")
	f.StringVar(&out, "out", "", "write the result JSON (results.Load) here")
	f.StringVar(&o.RecordsPath, "records", "", "write one JSON line per request here")
	f.StringVar(&slo, "slo", "", "goodput SLO, e.g. ttft=200ms,itl=50ms")
	f.BoolVar(&o.RetryUnsaturated, "retry-unsaturated", false, "re-run an unsaturated sweep once and keep the better curve")
	f.StringVar(&o.TokenizerPath, "tokenizer", "", "the model's tokenizer.json, to size prompts exactly (default: the hub cache's, else the server's /tokenize, else usage)")
	f.BoolVar(&progress, "progress", false, "show the progress bar even when stderr is not a terminal")
	f.BoolVar(&noScrape, "no-metrics", false, "do not scrape the endpoint's /metrics during the run")
	f.DurationVar(&o.RequestTimeout, "request-timeout", 10*time.Minute, "bound on one request")
	return cmd
}
