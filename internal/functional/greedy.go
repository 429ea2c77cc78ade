package functional

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The greedy case (issue 33): a GPU that computes wrong answers fast serves wrong tokens. Fixed
// prompts at temperature 0, one request at a time (batch 1: batched kernels need not be bitwise
// stable, so two GPUs at different batch sizes may legitimately part at a near-tie; alone, a
// request runs the same kernels on every GPU of one model), a few dozen tokens each. Each prompt
// is primed once (one token) so that both compared passes meet the same prefix-cache state, then
// asked twice. The case passes when it got its outputs; the judge compares them across GPUs (and a
// single GPU with its own repeat).

// GreedyOutputs is the case's name.
const GreedyOutputs = "greedy_outputs"

// greedyPrompts are the fixed prompts; greedyTokens how many tokens each asks for.
var greedyPrompts = []string{
	"List the first ten prime numbers, separated by commas.",
	"Translate 'good morning, how are you?' into French, German and Spanish.",
	"Explain in two sentences what high-bandwidth memory is.",
	"Write a haiku about a data center at night.",
}

const greedyTokens = 32

// idsNote is why text is compared when the engine gives no token ids.
const (
	idsRefused = "the engine refused return_token_ids (%s): compared by text, which a tokenizer maps back to the same ids only when the detokenisation is lossless"
	idsAbsent  = "the engine ignored return_token_ids (it returns token ids from vLLM 0.10.2 and in gpuvet's transformers front; logprobs carry token strings, not ids): compared by text"
)

type greedyAnswer struct {
	Choices []struct {
		Message      generated `json:"message"`
		TokenIDs     []int     `json:"token_ids"`
		FinishReason string    `json:"finish_reason"`
	} `json:"choices"`
}

// greedy runs the case and keeps what it received in s.greedy.
func (s *suite) greedy(ctx context.Context) (string, error) {
	g := &results.GreedyOutputs{Basis: "token_ids", MaxTokens: greedyTokens}
	ask := true
	for _, p := range greedyPrompts { // prime: the prompt's prefix cache, as both passes will find it
		if _, err := s.greedyOne(ctx, p, 1, &ask, g); err != nil {
			return "", fmt.Errorf("priming: %w", err)
		}
	}
	var passes [2][]results.GreedyOutput
	for i := range passes {
		for _, p := range greedyPrompts {
			o, err := s.greedyOne(ctx, p, greedyTokens, &ask, g)
			if err != nil {
				return "", fmt.Errorf("pass %d: %w", i+1, err)
			}
			passes[i] = append(passes[i], o)
		}
	}
	g.Outputs = passes[0]
	repeat := &results.GreedyOutputs{Basis: g.Basis, Outputs: passes[1]}
	g.RepeatDiff = repeat.FirstDiff(g)
	s.greedyOut = g
	detail := fmt.Sprintf("%d prompts × %d tokens at temperature 0, one at a time, compared by %s", len(greedyPrompts), greedyTokens, strings.ReplaceAll(g.Basis, "_", " "))
	if g.RepeatDiff != nil {
		return detail + "; the repeat differs at " + g.RepeatDiff.String(), nil
	}
	return detail + "; the repeat agrees", nil
}

// greedyOne asks one prompt at temperature 0. ask says whether to ask for token ids; a 400 that
// names return_token_ids turns it off (and the basis to text) for the rest of the case.
func (s *suite) greedyOne(ctx context.Context, prompt string, n int, ask *bool, g *results.GreedyOutputs) (results.GreedyOutput, error) {
	body := s.body(prompt, n)
	if *ask {
		body["return_token_ids"] = true
	}
	code, b, err := s.post(ctx, body)
	if err != nil {
		return results.GreedyOutput{}, err
	}
	if code == http.StatusBadRequest && *ask && strings.Contains(string(b), "return_token_ids") {
		*ask = false
		g.Basis, g.BasisNote = "text", fmt.Sprintf(idsRefused, fmt.Sprintf("HTTP 400: %.120s", b))
		return s.greedyOne(ctx, prompt, n, ask, g)
	}
	if code != http.StatusOK {
		return results.GreedyOutput{}, fmt.Errorf("want HTTP 200, got %d: %.200s", code, b)
	}
	var r greedyAnswer
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) == 0 {
		return results.GreedyOutput{}, fmt.Errorf("want an OpenAI chat completion with a choice, got %.200s", b)
	}
	c := r.Choices[0]
	out := results.GreedyOutput{Prompt: prompt, Text: c.Message.ReasoningContent + c.Message.Reasoning + c.Message.Content, Finish: c.FinishReason}
	if *ask {
		if c.TokenIDs == nil {
			*ask = false
			g.Basis, g.BasisNote = "text", idsAbsent
		} else {
			out.TokenIDs = c.TokenIDs
		}
	}
	return out, nil
}
