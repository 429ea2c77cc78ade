package main

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/inpod"
	"github.com/gpuvet/gpuvet/internal/results"
)

// probeOptions are `gpuvet probe`'s flags: the Kubernetes backend's readiness check, run next to
// the GPU, one real chat completion to each engine.
type probeOptions struct {
	urls                  []string
	model, out, apiKeyEnv string
	wait                  time.Duration
}

func newProbeCmd() *cobra.Command {
	var o probeOptions
	cmd := &cobra.Command{
		Use:   "probe [URL…] [--url URL…] --model MODEL",
		Short: "Send one real chat completion to each OpenAI-compatible server and report the tokens it returned, or its error",
		Long: `Sends one chat completion (max 8 tokens) to each --url, retrying a failed one until --wait passes,
and prints one line per server: the tokens it generated and how long it took, or the last error
with the server's response. --out writes the same as JSON. Exit 1 when any server failed.
The Kubernetes backend runs it in a Job next to the GPUs once a Dynamo deployment is Ready: Ready
means a real completion came back, not only that /health answers (an engine pod's load Job sends
its own first completion).

  gpuvet probe --url http://127.0.0.1:8000 --model Qwen/Qwen3-8B
  gpuvet probe http://127.0.0.1:8000 --model Qwen/Qwen3-8B`,
		// A URL given as an argument is a --url: `gpuvet probe URL` is what a user types first.
		Args: cobra.ArbitraryArgs,
		RunE: phases(&o),
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&o.urls, "url", nil, "server base URL, e.g. http://10.0.0.5:8000 (repeatable)")
	fl.StringVar(&o.model, "model", "", "model id to ask for")
	fl.StringVar(&o.apiKeyEnv, "api-key-env", "", "environment variable holding the API key")
	fl.DurationVar(&o.wait, "wait", 20*time.Second, "keep retrying a failed server this long")
	fl.StringVar(&o.out, "out", "", "also write the results as JSON here")
	return cmd
}

func probeOne(cmd *cobra.Command, url, model, key string, wait time.Duration) inpod.CompletionCheck {
	start := time.Now()
	for {
		rep, err := engine.Completion(cmd.Context(), url, model, key, "Reply with OK.", 8, 30*time.Second)
		c := inpod.CompletionCheck{URL: url, Tokens: rep.Tokens, Seconds: time.Since(start).Seconds()}
		if err == nil {
			return c
		}
		c.Error = err.Error()
		if time.Since(start) >= wait || cmd.Context().Err() != nil {
			return c
		}
		time.Sleep(time.Second)
	}
}

func (o *probeOptions) Complete(_ *cobra.Command, args []string) error {
	o.urls = append(o.urls, args...)
	return nil
}

// Validate checks a server and a model are named.
func (o *probeOptions) Validate() error {
	if len(o.urls) == 0 || o.model == "" {
		return usageErr("a server (URL or --url) and --model are required, e.g. gpuvet probe http://127.0.0.1:8000 --model Qwen/Qwen3-8B")
	}
	for _, u := range o.urls {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return usageErr("%q: not a server URL; want http(s)://HOST:PORT, e.g. http://127.0.0.1:8000", u)
		}
	}
	if o.out != "" {
		if err := checkReplaceable(o.out); err != nil {
			return usageErr("--out: %v", err)
		}
	}
	return nil
}

// Run asks every server for one completion at once and prints one line each.
func (o *probeOptions) Run(cmd *cobra.Command) error {
	key := os.Getenv(o.apiKeyEnv) // "" when none is named
	res := make([]inpod.CompletionCheck, len(o.urls))
	var wg sync.WaitGroup
	for i, u := range o.urls {
		wg.Go(func() { res[i] = probeOne(cmd, u, o.model, key, o.wait) })
	}
	wg.Wait()
	failed := 0
	for _, r := range res {
		if r.Error != "" {
			failed++
			fmt.Fprintf(cmd.OutOrStdout(), "%s: FAILED after %.1fs: %s\n", r.URL, r.Seconds, r.Error)
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d token(s) in %.2fs\n", r.URL, r.Tokens, r.Seconds)
		}
	}
	if o.out != "" {
		if err := results.WriteJSON(o.out, res); err != nil {
			return failedErr("--out: %v", err)
		}
	}
	if failed > 0 {
		return failedErr("%d of %d server(s) returned no completion", failed, len(res))
	}
	return nil
}
