package sim

import (
	"cmp"
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/roofline"
)

// EngineConfig is the serving engine's configuration, named as vLLM names it. Zero values take the
// defaults of DefaultEngineConfig.
type EngineConfig struct {
	TP               int     // tensor-parallel size: weights, KV and FLOPs split over TP GPUs
	MaxNumSeqs       int     // max sequences in one step (vLLM --max-num-seqs)
	MaxBatchedTokens int     // token budget of one step, prefill chunks included (--max-num-batched-tokens)
	GPUMemUtil       float64 // fraction of GPU memory the engine may use (--gpu-memory-utilization)
	MaxModelLen      int     // context length; 0: the model's max_context
	BlockSize        int     // KV block size in tokens (vLLM: 16)
	// StepOverhead and SeqOverhead add engine CPU to every step: a fixed cost, and a cost per
	// sequence in the step. They make a slow engine: one whose step loop is bound by its own
	// scheduler rather than the GPU (transformers' Python continuous batching on an 8B is about
	// 40 ms + 2 ms × batch), so that long requests under load outlast a rung. 0: none.
	StepOverhead, SeqOverhead time.Duration
	// APIOverhead, when set, replaces the modelled Frontend with one fixed cost before the engine.
	APIOverhead time.Duration
	// NoPrefixCache turns automatic prefix caching off (vLLM --no-enable-prefix-caching).
	NoPrefixCache bool
}

// DefaultEngineConfig is vLLM's V1 online-serving default on a data-centre GPU.
func DefaultEngineConfig() EngineConfig {
	return EngineConfig{TP: 1, MaxNumSeqs: 256, MaxBatchedTokens: 8192, GPUMemUtil: 0.9, BlockSize: 16}
}

func (c EngineConfig) withDefaults() EngineConfig {
	d := DefaultEngineConfig()
	c.TP, c.MaxNumSeqs, c.MaxBatchedTokens = cmp.Or(c.TP, d.TP), cmp.Or(c.MaxNumSeqs, d.MaxNumSeqs), cmp.Or(c.MaxBatchedTokens, d.MaxBatchedTokens)
	c.GPUMemUtil, c.BlockSize = cmp.Or(c.GPUMemUtil, d.GPUMemUtil), cmp.Or(c.BlockSize, d.BlockSize)
	return c
}

// activationReserveBytes is what vLLM keeps per GPU outside weights and KV: activations, CUDA
// graphs, allocator slack.
const activationReserveBytes = 2 << 30

// Perf is the cost model of one model on one GPU (or TP group): what an engine step costs, on
// top of the speed of light of internal/roofline.
type Perf struct {
	GPU   catalog.GPU
	Model catalog.Model
	Cfg   EngineConfig
	// Frontend is the per-request cost outside the engine (see Entry, Exit).
	Frontend Frontend

	gemm, mem float64 // achieved fractions of the BF16 tensor peak and of memory bandwidth
	stepCPU   float64 // seconds of engine CPU per step
	seqCPU    float64 // seconds of engine CPU per sequence in a step
	KVBlocks  int     // KV-cache capacity in blocks (per GPU, the same on every GPU of the group)
	// Speed scales every step: 1 healthy, 0.7 for a GPU 30 % slower (a straggler).
	Speed float64
	// Slowdown, when set, scales each step by what it says then (a throttle that comes and goes).
	Slowdown func() float64
}

// NewPerf builds the cost model for model on gpu under cfg. It fails when the weights do not fit,
// and when the GPU's architecture has no efficiency figures and its catalog entry sets none.
func NewPerf(gpu catalog.GPU, model catalog.Model, cfg EngineConfig) (*Perf, error) {
	cfg = cfg.withDefaults()
	if cfg.MaxModelLen == 0 {
		cfg.MaxModelLen = model.MaxContext
	}
	if cfg.TP < 1 || cfg.MaxNumSeqs < 1 || cfg.MaxBatchedTokens < 1 || cfg.BlockSize < 1 {
		return nil, fmt.Errorf("engine config: tp, max_num_seqs, max_batched_tokens and block_size must be ≥ 1, got %d, %d, %d, %d",
			cfg.TP, cfg.MaxNumSeqs, cfg.MaxBatchedTokens, cfg.BlockSize)
	}
	if !(cfg.GPUMemUtil > 0 && cfg.GPUMemUtil <= 1) { // NaN too
		return nil, fmt.Errorf("gpu_memory_utilization: must be in (0, 1], got %v", cfg.GPUMemUtil)
	}
	p := &Perf{GPU: gpu, Model: model, Cfg: cfg, Speed: 1, Frontend: DefaultFrontend()}
	fig, ok := archFig[gpu.Architecture]
	if !ok && (gpu.MFU == 0 || gpu.MBU == 0) {
		return nil, fmt.Errorf("gpu %s: the simulator has no efficiency figures for architecture %q (known: Ampere, Ada Lovelace, Hopper, Blackwell); set mfu and mbu for it in a catalog file (--catalog)",
			gpu.Key, gpu.Architecture)
	}
	p.gemm, p.mem = pick(gpu.MFU, fig.gemm), pick(gpu.MBU, fig.mem)
	p.stepCPU = pick(gpu.StepOverheadMs, stepCPUms) / 1e3
	p.seqCPU = pick(gpu.SeqOverheadUs, seqCPUus) / 1e6

	tp := float64(cfg.TP)
	mem := gpu.MemoryGiB * (1 << 30) * cfg.GPUMemUtil
	free := mem - model.WeightBytes()/tp - activationReserveBytes
	kvPerToken := model.KVBytesPerToken() / tp
	blocks := int(free / (kvPerToken * float64(cfg.BlockSize)))
	if blocks*cfg.BlockSize < cfg.MaxModelLen {
		need := (model.WeightBytes()/tp + activationReserveBytes + kvPerToken*float64(cfg.MaxModelLen)) / (1 << 30)
		return nil, fmt.Errorf("%s does not fit on %s with tp=%d: needs %.1f GiB per GPU for weights and one %d-token context, has %.1f GiB × %.2f; raise --tp or lower --max-model-len",
			model.ID, gpu.Key, cfg.TP, need, cfg.MaxModelLen, gpu.MemoryGiB, cfg.GPUMemUtil)
	}
	p.KVBlocks = blocks
	return p, nil
}

func pick(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

// KVTokens is the KV-cache capacity in tokens.
func (p *Perf) KVTokens() int { return p.KVBlocks * p.Cfg.BlockSize }

// Entry is the time from a request's arrival at the server to its place in the engine's queue.
func (p *Perf) Entry(promptTokens int, chat bool) time.Duration {
	if p.Cfg.APIOverhead > 0 {
		return p.Cfg.APIOverhead
	}
	return p.Frontend.Entry(promptTokens, chat)
}

// Exit is the time from the end of the step that produced a token to the token leaving the server.
func (p *Perf) Exit() time.Duration {
	if p.Cfg.APIOverhead > 0 {
		return 0
	}
	return p.Frontend.Output
}

// Batch is what one engine step computes.
type Batch struct {
	Tokens  int     // tokens computed: decode tokens plus prefill chunk tokens
	Seqs    int     // sequences in the step
	AttnCtx float64 // Σ over computed tokens of the context each attends to
	KVRead  float64 // Σ over sequences of their context length (KV read once per sequence)
}

// StepTime is the cost of one engine step, as the package doc's performance model says.
func (p *Perf) StepTime(b Batch) time.Duration {
	if b.Tokens == 0 {
		return 0
	}
	g, m, tp := p.GPU, p.Model, p.Cfg.TP
	step := roofline.Step{Tokens: b.Tokens, AttnCtx: b.AttnCtx, KVRead: b.KVRead}
	compute := roofline.ComputeSeconds(g, m, step, tp) / (p.gemm * waveFill(g, m, b.Tokens, tp))
	memory := roofline.MemorySeconds(g, m, step, tp) / p.mem
	t := smoothMax(compute, memory) +
		float64(m.Layers*kernelsPerLayer)*kernelGapUs/1e6 +
		p.comm(b.Tokens) +
		p.stepCPU + p.seqCPU*float64(b.Seqs) +
		p.Cfg.StepOverhead.Seconds() + p.Cfg.SeqOverhead.Seconds()*float64(b.Seqs)
	speed := p.Speed
	if speed <= 0 {
		speed = 1
	}
	if p.Slowdown != nil {
		speed *= p.Slowdown()
	}
	// Round the healthy step first, so a straggler's step is an exact multiple of it.
	return time.Duration(float64(time.Duration(t*1e9)) / speed)
}

// comm is the cost of tensor parallelism in a step: two all-reduces per layer over the GPU's link
// at the achieved fraction of its bandwidth, and the broadcast of the step to every worker.
func (p *Perf) comm(tokens int) float64 {
	if p.Cfg.TP <= 1 {
		return 0
	}
	link := p.GPU.TPLink()
	link.GBps *= allReduceEff
	return roofline.TPStepCommSeconds(link, p.Model, tokens, p.Cfg.TP) + tpStepUs/1e6
}
