package sim

import (
	"fmt"
	"math"
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
	// APIOverhead is the per-request cost outside the engine (HTTP, tokenisation, detokenisation): it
	// delays a request's entry into the engine and so adds to its TTFT.
	APIOverhead time.Duration
}

// DefaultEngineConfig is vLLM's V1 online-serving default on a data-centre GPU.
func DefaultEngineConfig() EngineConfig {
	return EngineConfig{TP: 1, MaxNumSeqs: 256, MaxBatchedTokens: 8192, GPUMemUtil: 0.9, BlockSize: 16,
		APIOverhead: 3 * time.Millisecond}
}

func (c EngineConfig) withDefaults() EngineConfig {
	d := DefaultEngineConfig()
	if c.TP == 0 {
		c.TP = d.TP
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = d.MaxNumSeqs
	}
	if c.MaxBatchedTokens == 0 {
		c.MaxBatchedTokens = d.MaxBatchedTokens
	}
	if c.GPUMemUtil == 0 {
		c.GPUMemUtil = d.GPUMemUtil
	}
	if c.BlockSize == 0 {
		c.BlockSize = d.BlockSize
	}
	if c.APIOverhead == 0 {
		c.APIOverhead = d.APIOverhead
	}
	return c
}

// Family defaults for the efficiency factors a catalog entry leaves at zero. Fitted to the public
// figures in calibration_test.go; see catalog.GPU for what each one means.
var familyEff = map[string]struct{ mfu, mbu, stepMs, seqUs float64 }{
	"Ampere":       {0.55, 0.75, 2.0, 22},
	"Ada Lovelace": {0.26, 0.80, 1.0, 45},
	"Hopper":       {0.70, 0.80, 1.5, 8},
	"Blackwell":    {0.40, 0.75, 2.0, 20},
}

const (
	activationReserveBytes = 2 << 30 // activations, CUDA graphs, allocator slack per GPU
	allReduceLatency       = 8 * time.Microsecond
)

// Perf is the roofline of one model on one GPU (or TP group): what an engine step costs.
type Perf struct {
	GPU   catalog.GPU
	Model catalog.Model
	Cfg   EngineConfig

	mfu, mbu     float64
	stepOverhead float64 // seconds
	seqOverhead  float64 // seconds per sequence in the step
	KVBlocks     int     // KV-cache capacity in blocks (per GPU, the same on every GPU of the group)
	// Speed scales every step: 1 healthy, 0.7 for a GPU 30 % slower (a straggler).
	Speed float64
}

// NewPerf builds the roofline for model on gpu under cfg. It fails when the weights do not fit.
func NewPerf(gpu catalog.GPU, model catalog.Model, cfg EngineConfig) (*Perf, error) {
	cfg = cfg.withDefaults()
	if cfg.MaxModelLen == 0 {
		cfg.MaxModelLen = model.MaxContext
	}
	if cfg.TP < 1 || cfg.MaxNumSeqs < 1 || cfg.MaxBatchedTokens < 1 || cfg.BlockSize < 1 {
		return nil, fmt.Errorf("engine config: tp, max_num_seqs, max_batched_tokens and block_size must be ≥ 1, got %d, %d, %d, %d",
			cfg.TP, cfg.MaxNumSeqs, cfg.MaxBatchedTokens, cfg.BlockSize)
	}
	if cfg.GPUMemUtil <= 0 || cfg.GPUMemUtil > 1 {
		return nil, fmt.Errorf("gpu_memory_utilization: must be in (0, 1], got %v", cfg.GPUMemUtil)
	}
	p := &Perf{GPU: gpu, Model: model, Cfg: cfg, Speed: 1}
	fe, ok := familyEff[gpu.Architecture]
	if !ok {
		fe = familyEff["Hopper"]
	}
	p.mfu, p.mbu = pick(gpu.MFU, fe.mfu), pick(gpu.MBU, fe.mbu)
	p.stepOverhead = pick(gpu.StepOverheadMs, fe.stepMs) / 1e3
	p.seqOverhead = pick(gpu.SeqOverheadUs, fe.seqUs) / 1e6

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

// Batch is what one engine step computes.
type Batch struct {
	Tokens  int     // tokens computed: decode tokens plus prefill chunk tokens
	Seqs    int     // sequences in the step
	AttnCtx float64 // Σ over computed tokens of the context each attends to
	KVRead  float64 // Σ over sequences of their context length (KV read once per sequence)
}

// StepTime is the cost of one engine step: the larger of compute and memory time on the roofline,
// plus the tensor-parallel all-reduces and the fixed and per-sequence overheads.
func (p *Perf) StepTime(b Batch) time.Duration {
	if b.Tokens == 0 {
		return 0
	}
	step := roofline.Step{Tokens: b.Tokens, AttnCtx: b.AttnCtx, KVRead: b.KVRead}
	compute := roofline.ComputeSeconds(p.GPU, p.Model, step, p.Cfg.TP) / p.mfu
	memory := roofline.MemorySeconds(p.GPU, p.Model, step, p.Cfg.TP) / p.mbu
	t := math.Max(compute, memory) + p.allReduce(b.Tokens) + p.stepOverhead + p.seqOverhead*float64(b.Seqs)
	speed := p.Speed
	if speed <= 0 {
		speed = 1
	}
	return time.Duration(t / speed * 1e9)
}

// allReduce is the cost of tensor parallelism: two all-reduces of the activations per layer, over
// NVLink when the GPU has it, else PCIe.
func (p *Perf) allReduce(tokens int) float64 {
	if p.Cfg.TP <= 1 {
		return 0
	}
	tp := float64(p.Cfg.TP)
	link := p.GPU.NVLinkGBps
	if link == 0 {
		link = p.GPU.PCIeGBps() * 0.8
	}
	if link == 0 {
		link = 25
	}
	perReduce := float64(tokens*p.Model.Hidden*p.Model.DTypeBytes) * 2 * (tp - 1) / tp / (link * 1e9)
	return float64(2*p.Model.Layers) * (perReduce + allReduceLatency.Seconds())
}
