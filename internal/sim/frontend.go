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

// DefaultFrontend is vLLM V1's OpenAI server on a server-class CPU. Sources: vLLM's v0.6.0
// performance post (Llama-3-8B on one H100: before the API server was moved out of the engine's
// process it took 33 % of the time of a ~10 ms step, i.e. ~3 ms per step across all requests);
// Hugging Face tokenizers' README (1 GB of text in < 20 s on a server CPU, ~10 µs per 1000 tokens
// per core in aggregate; a single request's call, Python binding included, is ~1 µs per token).
// The split between HTTP, handoff and output is not published; their sum (≈ 4 ms at 512 tokens) is
// set by the light-load TTFT of the L40S calibration case and the A100 fit rows of
// docs/sim-validation.md.
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
