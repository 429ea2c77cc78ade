package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// apiError is an error the server answers with, shaped as vLLM shapes it:
// {"error": {"message": …, "type": "BadRequestError", "param": null, "code": 400}}.
type apiError struct {
	Status  int
	Type    string
	Message string
	Param   string
}

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "BadRequestError", Message: fmt.Sprintf(format, args...), Param: param}
}

func (e *apiError) body() []byte {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": e.Message, "type": e.Type, "param": param, "code": e.Status}})
	return b
}

// chatMessage is one chat message; content is a string or a list of {"type":"text","text":…} parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	text    string
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// genRequest is the body of /v1/completions and /v1/chat/completions (the fields the simulator
// honours; others are accepted and ignored, as vLLM ignores what it does not use).
type genRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           int             `json:"min_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	Temperature         *float64        `json:"temperature"`
	Seed                *int64          `json:"seed"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	ReturnTokenIDs      bool            `json:"return_token_ids"`

	promptText  string // the text the prompt tokens were counted on
	promptToks  int
	maxTokens   int // resolved: max_completion_tokens, max_tokens, or what the context leaves
	temperature float64
}

// parseGenRequest decodes and checks a generation request. maxModelLen bounds prompt + max_tokens.
func parseGenRequest(body []byte, chat bool, maxModelLen int) (*genRequest, *apiError) {
	var r genRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil {
		return nil, badRequest("", "request body: invalid JSON (%v); send a JSON object", err)
	}
	if chat {
		if len(r.Messages) == 0 {
			return nil, badRequest("messages", "messages: required, a non-empty list of {role, content}")
		}
		if e := readMessages(r.Messages, true); e != nil {
			return nil, e
		}
		r.promptText = chatPrompt(r.Messages)
		r.promptToks = Count(r.promptText)
	} else {
		text, toks, err := promptOf(r.Prompt)
		if err != nil {
			return nil, badRequest("prompt", "prompt: %v", err)
		}
		if toks == 0 { // vLLM refuses it too: a request with nothing to condition on is a client's bug
			return nil, badRequest("prompt", "prompt: empty (no tokens); the decoder prompt cannot be empty")
		}
		r.promptText, r.promptToks = text, toks
	}
	if r.N != nil && *r.N != 1 {
		return nil, badRequest("n", "n: the simulator generates one choice per request, got n=%d", *r.N)
	}
	r.temperature = 1
	if r.Temperature != nil {
		if *r.Temperature < 0 {
			return nil, badRequest("temperature", "temperature: must be ≥ 0, got %v", *r.Temperature)
		}
		r.temperature = *r.Temperature
	}
	mt := cmp.Or(r.MaxCompletionTokens, r.MaxTokens)
	if mt != nil && *mt < 1 {
		return nil, badRequest("max_tokens", "max_tokens: must be at least 1, got %d", *mt)
	}
	if r.MinTokens < 0 {
		return nil, badRequest("min_tokens", "min_tokens: must be ≥ 0, got %d", r.MinTokens)
	}
	if mt != nil && r.MinTokens > *mt {
		return nil, badRequest("min_tokens", "min_tokens: must be ≤ max_tokens=%d, got %d", *mt, r.MinTokens)
	}
	if mt == nil {
		if r.promptToks >= maxModelLen {
			return nil, badRequest("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", maxModelLen, r.promptToks)
		}
		r.maxTokens = maxModelLen - r.promptToks
	} else {
		r.maxTokens = *mt
		if r.promptToks+r.maxTokens > maxModelLen {
			return nil, badRequest("max_tokens", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				maxModelLen, r.promptToks+r.maxTokens, r.promptToks, r.maxTokens)
		}
	}
	r.MinTokens = min(r.MinTokens, r.maxTokens)
	return &r, nil
}

// readMessages flattens each message's content into its text; needRole: a role is required too.
func readMessages(msgs []chatMessage, needRole bool) *apiError {
	for i := range msgs {
		m := &msgs[i]
		if needRole && m.Role == "" {
			return badRequest("messages", "messages[%d].role: required (system, user, assistant, …)", i)
		}
		t, err := contentText(m.Content)
		if err != nil {
			return badRequest("messages", "messages[%d].content: %v", i, err)
		}
		m.text = t
	}
	return nil
}

// contentText flattens a chat content: a string, or a list of text parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or a list of {\"type\":\"text\",\"text\":…} parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d has type %q; the simulator takes text parts only", i, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// promptOf reads a completion prompt: a string, a list of one string, or token ids (a list of
// integers, or a list of one such list). It returns the text (empty for ids) and the token count.
func promptOf(raw json.RawMessage) (string, int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", 0, fmt.Errorf("required: a string or a list of token ids")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, Count(s), nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		if len(ss) != 1 {
			return "", 0, fmt.Errorf("a list of %d prompts; the simulator serves one prompt per request", len(ss))
		}
		return ss[0], Count(ss[0]), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		return "", len(ids), nil
	}
	var idss [][]int
	if err := json.Unmarshal(raw, &idss); err == nil && len(idss) == 1 {
		return "", len(idss[0]), nil
	}
	return "", 0, fmt.Errorf("expected a string, a list of one string, or a list of token ids")
}

// tokenizeRequest is the body of POST /tokenize: a prompt or chat messages.
type tokenizeRequest struct {
	Model               string        `json:"model"`
	Prompt              *string       `json:"prompt"`
	Messages            []chatMessage `json:"messages"`
	AddGenerationPrompt *bool         `json:"add_generation_prompt"`
}

// parseTokenizeRequest reads a /tokenize body: its model (as far as it could be read, for the check
// that comes first) and the text to tokenize.
func parseTokenizeRequest(body []byte) (model, text string, err *apiError) {
	var r tokenizeRequest
	if e := json.Unmarshal(body, &r); e != nil {
		return r.Model, "", badRequest("",
			"request body: invalid JSON (%v); send {\"prompt\": \"…\"} or {\"messages\": […]}", e)
	}
	switch {
	case r.Prompt != nil && r.Messages != nil:
		return r.Model, "", badRequest("prompt", "give either prompt or messages, not both")
	case r.Prompt != nil:
		return r.Model, *r.Prompt, nil
	case r.Messages != nil:
		if e := readMessages(r.Messages, false); e != nil {
			return r.Model, "", e
		}
		return r.Model, chatPrompt(r.Messages), nil
	}
	return r.Model, "", badRequest("prompt", "either prompt or messages must be provided")
}
