package dataset

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// File is a list of prompts read from a file; Prompt(i) cycles through them.
type File struct {
	Name    string
	Prompts []Prompt
}

// Describe implements Source.
func (f *File) Describe() string { return f.Name }

// Prompt implements Source.
func (f *File) Prompt(i int) Prompt { return f.Prompts[i%len(f.Prompts)] }

// jsonlLine is one line of a prompt JSONL file. "prompt" (or "text") is required.
type jsonlLine struct {
	Prompt       *string `json:"prompt"`
	Text         *string `json:"text"`
	OutputTokens int     `json:"output_tokens"`
}

// shareGPTItem is one conversation of a ShareGPT file; the first human turn is the prompt.
type shareGPTItem struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// Load reads prompts from path: a ShareGPT JSON array (objects with "conversations") or JSONL with one
// {"prompt": "...", "output_tokens": N} per line. Errors name the line or item that is wrong.
func Load(path string) (*File, error) {
	raw, err := filelimit.Read(path, filelimit.Data, "prompt file")
	if err != nil {
		return nil, fmt.Errorf("prompt file: %w", err)
	}
	f, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("prompt file %s: %w", path, err)
	}
	f.Name = filepath.Base(path)
	return f, nil
}

// Parse reads prompts from the bytes of a ShareGPT or JSONL file.
func Parse(raw []byte) (*File, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return parseShareGPT(trimmed)
	}
	return parseJSONL(raw)
}

func parseShareGPT(raw []byte) (*File, error) {
	var items []shareGPTItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("ShareGPT JSON: %w (want an array of {\"conversations\": [{\"from\": \"human\", \"value\": ...}]})", err)
	}
	f := &File{}
	for _, it := range items {
		for _, turn := range it.Conversations {
			if (turn.From == "human" || turn.From == "user") && strings.TrimSpace(turn.Value) != "" {
				f.Prompts = append(f.Prompts, Prompt{Text: turn.Value})
				break
			}
		}
	}
	if len(f.Prompts) == 0 {
		return nil, fmt.Errorf("ShareGPT JSON: %d conversations, none with a non-empty human turn", len(items))
	}
	return f, nil
}

func parseJSONL(raw []byte) (*File, error) {
	f := &File{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l jsonlLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("line %d: not JSON (%w); want {\"prompt\": \"...\", \"output_tokens\": N}", line, err)
		}
		text := cmp.Or(l.Prompt, l.Text)
		if text == nil || *text == "" {
			return nil, fmt.Errorf("line %d: no \"prompt\" (or \"text\") string", line)
		}
		if l.OutputTokens < 0 {
			return nil, fmt.Errorf("line %d: output_tokens %d, want ≥ 0", line, l.OutputTokens)
		}
		f.Prompts = append(f.Prompts, Prompt{Text: *text, OutputTokens: l.OutputTokens})
	}
	if err := sc.Err(); err != nil { // never io.EOF: Scanner.Err reports only other errors
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(f.Prompts) == 0 {
		return nil, fmt.Errorf("no prompts (want JSONL lines {\"prompt\": ...} or a ShareGPT array)")
	}
	return f, nil
}
