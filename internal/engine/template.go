// Package engine launches serving engines (vLLM, SGLang, TensorRT-LLM, or any command through a
// template) as child processes, one per GPU or tp group, waits until a real completion comes back,
// captures their logs with secrets redacted, and always cleans them up: each engine runs in its own
// process group, which Stop kills whole.
package engine

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Vars are the values substituted into a template.
type Vars struct {
	Model                string
	Port                 int
	GPUs                 []int
	TP                   int
	MaxModelLen          int
	GPUMemoryUtilization float64
	Front                string // path of the written front script; set by Start when the template names {front}
}

// gpuList is the GPUs as CUDA_VISIBLE_DEVICES lists them: "0,1".
func (v Vars) gpuList() string {
	gpus := make([]string, len(v.GPUs))
	for i, g := range v.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	return strings.Join(gpus, ",")
}

func (v Vars) table() map[string]string {
	return map[string]string{
		"{model}":                  v.Model,
		"{port}":                   strconv.Itoa(v.Port),
		"{gpu}":                    v.gpuList(),
		"{tp}":                     strconv.Itoa(v.TP),
		"{max_model_len}":          strconv.Itoa(v.MaxModelLen),
		"{gpu_memory_utilization}": strconv.FormatFloat(v.GPUMemoryUtilization, 'f', -1, 64),
		"{front}":                  v.Front,
	}
}

// Expand splits a template into words (shell-like quoting: '…', "…", \x) and substitutes the
// placeholders in each word. An unknown {placeholder} is an error naming it.
func Expand(tmpl string, v Vars) ([]string, error) {
	words, err := SplitWords(tmpl)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command template")
	}
	tab := v.table()
	pairs := make([]string, 0, 2*len(tab))
	for k, val := range tab {
		pairs = append(pairs, k, val)
	}
	// One pass: a value is put in as it is, never read as a template (a model folder named
	// "/m/{port}" stays that, and "{x}" in it is no unknown placeholder).
	r := strings.NewReplacer(pairs...)
	for i, w := range words {
		for _, p := range placeholder.FindAllString(w, -1) {
			if _, known := tab[p]; !known {
				return nil, fmt.Errorf("unknown placeholder %s in %q; known: {model} {port} {gpu} {tp} {max_model_len} {gpu_memory_utilization} {front}", p, tmpl)
			}
		}
		words[i] = r.Replace(w)
	}
	return words, nil
}

// placeholder is what a template's placeholders look like: {lower_case}.
var placeholder = regexp.MustCompile(`\{[_a-z]+\}`)

// SplitWords splits a command line like a POSIX shell does for words and quotes (no expansion).
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("command ends with a lone backslash: %q", s)
			}
			i++
			if s[i] == '\n' {
				continue // a line continuation (a YAML block's "\" at a line's end): both go
			}
			cur.WriteByte(s[i])
			inWord = true
		case c == '\'':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unclosed %c quote in command %q", c, s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			// As in a POSIX shell, a backslash inside "…" escapes only $ ` " \ and a newline.
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("$`\"\\\n", s[j+1]) >= 0 {
					j++
					if s[j] == '\n' {
						continue // a line continuation: both go
					}
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unclosed %c quote in command %q", c, s)
			}
			i = j
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
