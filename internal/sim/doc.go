// Package sim is gpuvet's simulated GPU serving an LLM: a server that behaves like vLLM serving a
// given model on a given GPU, closely enough that a curve measured against it has the right shape
// and scale, and virtual GPUs that a health phase can read.
//
// # Performance model
//
// Engine is vLLM's V1 scheduler in miniature (continuous batching up to MaxNumSeqs, chunked prefill
// under a per-step token budget, a paged KV cache sized from GPU memory × gpu_memory_utilization −
// weights − an activation reserve, requests queued when it is full, recompute preemption). Each step
// costs the speed of light of internal/roofline at the architecture's achieved fractions
// (efficiency.go), compute further divided by the wave fill of the step's GEMMs on the GPU's SMs,
// the two joined by a smooth maximum; plus a gap at every kernel boundary, two all-reduces per layer
// under TP, and the engine's CPU time per step and per sequence. A request pays the frontend
// (frontend.go) before the engine and after each step. Tokens leave at step boundaries. The tests'
// RunVirtual drives the engine in virtual time (no sleeping); Listen drives it in wall time.
//
// # Fixed mode
//
// Config.TTFT / Config.ITL (optionally Jitter) give exact latencies with no load effects, for any
// model name. One goroutine and one timer release every stream's tokens.
//
// # API for other packages
//
// Listen serves a Config on an address (URL, Close); NewFleet makes virtual GPUs (GPUs, Sample,
// Speed, Microbench as NVML and the health phase read them). A server attached to GPU i
// (Config.Fleet, Config.GPUIndex; with Engine.TP = N it occupies GPUs i..i+N−1) moves those GPUs'
// power, clock and temperature with its load, and runs at the speed of its slowest GPU. Run is
// `gpuvet sim`: a fleet plus one server per GPU or TP group on consecutive ports. A server on a
// fleet also serves GET /sim/gpus and GET /sim/sample?gpu=I (JSON) for readers in another process.
//
// # HTTP surface (vLLM's OpenAI-compatible server)
//
// GET /v1/models, POST /v1/completions, POST /v1/chat/completions (stream or not; usage with
// stream_options.include_usage and continuous_usage_stats; max_tokens, max_completion_tokens,
// min_tokens, ignore_eos, temperature, seed), POST /tokenize, POST /detokenize, GET /health,
// GET /metrics (vLLM's names, and the simulator's own lag behind its schedule: lag.go), GET /version.
// Errors are vLLM's JSON: {"error": {"message", "type", "param", "code"}}; 404 for an unknown
// model, 400 when prompt + max_tokens exceed the context.
//
// Without ignore_eos a request stops on its own after 64–511 tokens (derived from its text and
// seed; finish_reason "stop"), never before min_tokens, never after max_tokens ("length"). Tokens
// are counted by the simulator's own tokenizer (tokenizer.go), so /tokenize and usage agree.
//
// # Faults and ground truth
//
// Faults (faults.go) are drawn from Config.Seed and the request's arrival number. Config.Trace
// receives one TraceRecord per request (arrival, each token's send time, counts, its fault).
package sim
