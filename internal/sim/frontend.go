package sim

import "time"

// Frontend is what a request costs outside the engine's GPU steps, stage by stage, as vLLM's
// OpenAI server spends it. The HTTP server and the virtual-time driver both take a request's
// entry and exit delays from here (Perf.Entry, Perf.Exit), so a client of either sees the same TTFT.
type Frontend struct {
	// HTTP is receiving and parsing the request and validating it (FastAPI/uvicorn, pydantic).
	HTTP time.Duration
	// ChatTemplate is rendering the chat template (Jinja), chat completions only.
	ChatTemplate time.Duration
	// TokenizePerToken is the prompt's tokenisation (Hugging Face fast tokenizer), per token.
	TokenizePerToken time.Duration
	// Handoff is the API server handing the request to the engine core (ZMQ + msgpack) and the
	// scheduler taking it into its waiting queue.
	Handoff time.Duration
	// Output is a token's way back: engine core → API server, detokenisation, the SSE frame.
	// It delays every token by the same amount, so it shows in TTFT and E2E, never in ITL.
	Output time.Duration
}

// DefaultFrontend is vLLM V1's OpenAI server on a server-class CPU. Published figures behind it:
//   - vLLM's v0.6.0 performance post (blog.vllm.ai/2024/09/05/perf-update.html): with the API server
//     in the engine's process, Llama-3-8B on one H100 spent 33 % of its time in it, ~3 ms of each
//     ~10 ms step across all requests; V1 moved it to its own process, so a request now pays its own
//     share once on the way in (HTTP + Handoff) and once per token on the way out (Output).
//   - Hugging Face tokenizer encode inside an OpenAI server (tenstorrent/tt-inference-server#2173):
//     131 tokens in 1.3–2.8 ms, mostly the call's fixed cost; the fixed part is in HTTP, the
//     per-token part is the marginal ~1 µs/token of the Rust encoder.
//   - Detokenisation is ~1 % of a Llama-70B TP4 A100 step (vllm-project/vllm#818): small next to
//     the SSE write and the IPC back, which Output holds.
//
// The split of the fixed costs between HTTP, Handoff and Output is not published: their sum
// (≈ 3.5 ms, plus 0.5 ms of chat template) is set by the light-load TTFTs of the L40S calibration
// case and the A100 fit rows of docs/sim-validation.md.
func DefaultFrontend() Frontend {
	return Frontend{
		HTTP:             1500 * time.Microsecond,
		ChatTemplate:     500 * time.Microsecond,
		TokenizePerToken: time.Microsecond,
		Handoff:          500 * time.Microsecond,
		Output:           1 * time.Millisecond,
	}
}

// Entry is the time from a request's arrival to its place in the engine's waiting queue.
func (f Frontend) Entry(promptTokens int, chat bool) time.Duration {
	d := f.HTTP + f.Handoff + time.Duration(promptTokens)*f.TokenizePerToken
	if chat {
		d += f.ChatTemplate
	}
	return d
}
