package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxSSELine bounds one SSE line or event: a chunk is a few hundred bytes.
const maxSSELine = 4 << 20

var (
	errLineTooLong  = errors.New("SSE line longer than 4 MiB")
	errEventTooLong = errors.New("SSE event longer than 4 MiB (data lines without the blank line that ends an event)")
)

// tooLong says whether err is an SSE line or event over maxSSELine: malformed, whatever else.
func tooLong(err error) bool {
	return errors.Is(err, errLineTooLong) || errors.Is(err, errEventTooLong)
}

// sseReader reads the data payloads of Server-Sent Events (WHATWG): "data:" lines joined by "\n" make
// one event, dispatched at a blank line (or EOF); comments and other fields are skipped.
type sseReader struct {
	r    *bufio.Reader
	data []byte
	line []byte
}

func newSSEReader(r io.Reader) *sseReader {
	// Small: the transport below already buffers, and thousands of streams each hold one of these.
	return &sseReader{r: bufio.NewReaderSize(r, 512)}
}

// Next returns the next event's data, valid until the next call; io.EOF at the end.
func (s *sseReader) Next() ([]byte, error) {
	s.data = s.data[:0]
	have := false
	for {
		line, err := s.readLine()
		if err != nil {
			if have && (err == io.EOF || err == io.ErrUnexpectedEOF) {
				return s.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if have {
				return s.data, nil
			}
			continue
		}
		value, ok := sseData(line)
		if !ok {
			continue
		}
		if have {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		if len(s.data) > maxSSELine {
			return nil, errEventTooLong
		}
		have = true
	}
}

// sseData is the value of a non-empty "data" line (one leading space dropped); ok is false for others.
func sseData(line []byte) (value []byte, ok bool) {
	if line[0] == ':' {
		return nil, false
	}
	field := line
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	return value, string(field) == "data"
}

// readLine returns one line without its terminator; a last line without one is returned before io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.r.ReadSlice('\n')
		s.line = append(s.line, frag...)
		if len(s.line) > maxSSELine {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(s.line) > 0 {
				return bytes.TrimRight(s.line, "\r"), nil
			}
			return nil, err
		}
		return bytes.TrimRight(s.line[:len(s.line)-1], "\r"), nil
	}
}

// chunk is what gpuvet reads from one streamed chunk of /v1/chat/completions or /v1/completions.
type chunk struct {
	// TextBytes: generated text's bytes (content, reasoning or text); ReasoningBytes: the reasoning's.
	TextBytes, ReasoningBytes int
	HasChoices                bool // a usage-only final chunk carries none
	Finish                    string
	HasUsage                  bool
	Usage                     usage
	Err                       string // the message of an in-stream {"error": {...}}
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type wireChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// parseChunk decodes one chunk's JSON: anything not a JSON object, or with negative usage counts, is
// an error (malformed_chunk). The usual chunk takes the fast path (fastChunk), else encoding/json.
func parseChunk(b []byte) (chunk, error) {
	if c, ok := fastChunk(b); ok {
		return c, nil
	}
	return slowChunk(b)
}

// slowChunk decodes a chunk with encoding/json: the reference the fast path is tested against.
func slowChunk(b []byte) (chunk, error) {
	var w wireChunk
	if err := json.Unmarshal(b, &w); err != nil {
		return chunk{}, fmt.Errorf("chunk is not the expected JSON object: %w (starts %q)", err, head(b, 80))
	}
	var c chunk
	if len(w.Error) > 0 && string(w.Error) != "null" {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(w.Error, &e) != nil || e.Message == "" {
			e.Message = head(w.Error, 200)
		}
		c.Err = e.Message
		return c, nil
	}
	if w.Usage != nil {
		if w.Usage.PromptTokens < 0 || w.Usage.CompletionTokens < 0 {
			return chunk{}, fmt.Errorf("usage with negative counts (prompt %d, completion %d)", w.Usage.PromptTokens, w.Usage.CompletionTokens)
		}
		c.HasUsage, c.Usage = true, *w.Usage
	}
	for _, ch := range w.Choices {
		c.HasChoices = true
		for _, s := range []*string{ch.Delta.Content, ch.Delta.ReasoningContent, ch.Delta.Reasoning, ch.Text} {
			if s != nil {
				c.TextBytes += len(*s)
			}
		}
		for _, s := range []*string{ch.Delta.ReasoningContent, ch.Delta.Reasoning} {
			if s != nil {
				c.ReasoningBytes += len(*s)
			}
		}
		if ch.FinishReason != nil {
			c.Finish = *ch.FinishReason
		}
	}
	return c, nil
}

func head(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
