package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// simOptions are `gpuvet sim`'s flags: Complete -> Validate -> Run (one library call: sim.Run).
type simOptions struct {
	sim.RunOptions
	catalogFile string
	prefixCache bool
}

func newSimCmd() *cobra.Command {
	so := simOptions{RunOptions: sim.RunOptions{StragglerIndex: -1}}
	o := &so.RunOptions
	catalogFile := &so.catalogFile
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Serve a simulated GPU running vLLM's OpenAI-compatible API (roofline model, or fixed latencies)",
		Long: `gpuvet sim behaves like vLLM serving --model on --gpu: continuous batching, a KV cache sized from
GPU memory, chunked prefill, each engine step costed on the GPU's roofline. With --ttft/--itl it is a
fixed-latency server instead (any --model name). --gpus N starts one endpoint per GPU (or per --tp
group) on --port, --port+1, …

The step cost is the speed of light of the GPU's datasheet (BF16 tensor peak, memory bandwidth,
NVLink or PCIe for TP all-reduces) at an achieved fraction per architecture, plus losses derived from
the step's shape; a request also pays the server's frontend (HTTP, chat template, tokenisation,
hand-off, output). docs/sim-validation.md compares it with published vLLM/SGLang figures.
Where each GPU's efficiency figures come from:
  ` + strings.Join(sim.ArchBasis(catalog.Builtin()), "\n  "),
		Example: `  gpuvet sim --gpu H100 --model Qwen/Qwen3-8B
  gpuvet sim --model any-name --ttft 50ms --itl 10ms --jitter 0.1
  gpuvet sim --gpu H200 --model meta-llama/Llama-3.1-70B-Instruct --gpus 8 --tp 4 --trace trace.jsonl`,
		Args: cobra.NoArgs,
		RunE: phases(&so),
	}
	f := cmd.Flags()
	f.StringVar(&o.GPU, "gpu", "", "GPU model: catalog key or exact nvidia-smi name (H100, H200, L40S, A100, B200, GB200, RTX-PRO-6000, …)")
	f.StringVar(&o.Model, "model", "", "served model id (a catalog model; any name in fixed mode)")
	f.IntVar(&o.GPUs, "gpus", 1, "number of virtual GPUs; one endpoint per GPU (or per --tp group)")
	f.IntVar(&o.Engine.TP, "tp", 1, "tensor-parallel size: GPUs per engine")
	f.StringVar(&o.Host, "host", "127.0.0.1", "listen host")
	f.IntVar(&o.Port, "port", 8000, "listen port of the first endpoint (endpoint i: port+i; 0: any free port)")
	f.IntVar(&o.Engine.MaxNumSeqs, "max-num-seqs", 256, "max sequences per engine step")
	f.IntVar(&o.Engine.MaxBatchedTokens, "max-num-batched-tokens", 8192, "token budget per engine step (chunked prefill)")
	f.Float64Var(&o.Engine.GPUMemUtil, "gpu-memory-utilization", 0.9, "fraction of GPU memory for weights + KV cache")
	f.IntVar(&o.Engine.MaxModelLen, "max-model-len", 0, "context length (0: the model's)")
	f.IntVar(&o.ReasoningTokens, "reasoning-tokens", 0, "a reasoning model: the first N tokens of each streamed chat answer come as delta.reasoning_content (never the last)")
	f.BoolVar(&so.prefixCache, "enable-prefix-caching", true, "keep computed prompt blocks and reuse them for prompts that share them, as vLLM V1 does (=false to turn it off)")
	f.DurationVar(&o.Engine.APIOverhead, "api-overhead", 0, "replace the modelled per-request frontend cost (HTTP, chat template, tokenisation, output) with this fixed cost (0: modelled)")
	f.DurationVar(&o.TTFT, "ttft", 0, "fixed mode: time to first token")
	f.DurationVar(&o.ITL, "itl", 0, "fixed mode: inter-token latency")
	f.Float64Var(&o.Jitter, "jitter", 0, "fixed mode: each latency scaled by 1 ± jitter (uniform), e.g. 0.1")
	f.Int64Var(&o.Seed, "seed", 0, "seed of every random choice (output text, faults, jitter, UUIDs)")
	f.StringVar(&o.TracePath, "trace", "", "write per-request ground truth (arrival, each token's send time, counts) as JSONL to FILE")
	f.StringVar(catalogFile, "catalog", "", "YAML file adding or replacing GPUs and models in the catalog")
	f.Float64Var(&o.Faults.Rate5xx, "fault-5xx", 0, "fraction of requests answered 500")
	f.Float64Var(&o.Faults.Rate429, "fault-429", 0, "fraction of requests answered 429")
	f.Float64Var(&o.Faults.CutRate, "fault-cut", 0, "fraction of streams cut mid-way (connection closed)")
	f.Float64Var(&o.Faults.StallRate, "fault-stall", 0, "fraction of requests that stall once for --fault-stall-for")
	f.DurationVar(&o.Faults.Stall, "fault-stall-for", 0, "length of a stall")
	f.Float64Var(&o.Faults.MalformedRate, "fault-malformed", 0, "fraction of streams with one malformed SSE event")
	f.DurationVar(&o.Faults.SlowStart, "slow-start", 0, "answer 503 (health included) for this long after start")
	f.IntVar(&o.StragglerIndex, "straggler", -1, "index of a GPU that runs slower (-1: none)")
	f.Float64Var(&o.StragglerPct, "straggler-pct", results.DefaultSim().StragglerPct, "how much slower the straggler is, in percent")
	return cmd
}

// Complete loads the catalog: the built-in one, extended by --catalog.
func (o *simOptions) Complete(*cobra.Command, []string) error {
	o.Engine.NoPrefixCache = !o.prefixCache
	o.Catalog = catalog.Builtin()
	if o.catalogFile != "" {
		cat, err := catalog.LoadFile(o.Catalog, o.catalogFile)
		if err != nil {
			return usageErr("--catalog: %v", err)
		}
		o.Catalog = cat
	}
	return nil
}

// Validate checks the flags sim.Run does not: a model, and a GPU unless the latencies are fixed.
func (o *simOptions) Validate() error {
	if o.Model == "" {
		return usageErr("--model: required (e.g. Qwen/Qwen3-8B)")
	}
	if o.GPU == "" && !o.Fixed() {
		return usageErr("--gpu: required unless fixed mode (--ttft/--itl); known: %v", o.Catalog.GPUKeys())
	}
	return nil
}

// Run serves until Ctrl-C or SIGTERM.
func (o *simOptions) Run(cmd *cobra.Command) error {
	o.Out = cmd.OutOrStdout()
	ctx, stop := interruptible(context.Background())
	defer stop()
	// sim.Run fails only before it serves (a bad flag, a port in use): exit 2, nothing started.
	err := sim.Run(ctx, o.RunOptions)
	var ue *sim.UsageError
	if errors.As(err, &ue) {
		return usageErr("%v", ue.Err)
	}
	if err != nil {
		return usageErr("%v", err)
	}
	return nil
}
