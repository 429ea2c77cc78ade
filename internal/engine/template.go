// Package engine launches serving engines (vLLM, SGLang, TensorRT-LLM, or any command through a
// template) as child processes, one per GPU or tp group, waits until a real completion comes back,
// captures their logs with secrets redacted, and always cleans them up: each engine runs in its own
// process group, which Stop kills whole.
package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// Templates are the built-in launch command lines. Placeholders: {model} {port} {gpu} {tp}
// {max_model_len} {gpu_memory_utilization} {front} (the path of gpuvet's transformers front script). They are split into words before substitution and run
// without a shell, so a value can never inject a command.
var Templates = map[string]string{
	"vllm": "vllm serve {model} --host 127.0.0.1 --port {port} --tensor-parallel-size {tp} " +
		"--max-model-len {max_model_len} --gpu-memory-utilization {gpu_memory_utilization}",
	"sglang": "python -m sglang.launch_server --model-path {model} --host 127.0.0.1 --port {port} " +
		"--tp-size {tp} --context-length {max_model_len} --mem-fraction-static {gpu_memory_utilization}",
	"trtllm": "trtllm-serve {model} --host 127.0.0.1 --port {port} --tp_size {tp} " +
		"--max_seq_len {max_model_len} --kv_cache_free_gpu_memory_fraction {gpu_memory_utilization}",
	// transformers: gpuvet's own thin OpenAI front (front/transformers_front.py, written next to the
	// engine log as {front}) over transformers' continuous-batching engine. Where transformers[serving]
	// is installed, engine.command can run `transformers serve` instead (see docs/engines.md).
	"transformers": "python3 {front} --model {model} --host 127.0.0.1 --port {port} " +
		"--max-model-len {max_model_len} --gpu-memory-utilization {gpu_memory_utilization}",
}

// VersionCommands print the engine's version on stdout.
var VersionCommands = map[string]string{
	"vllm":         `python3 -c "import vllm; print(vllm.__version__)"`,
	"sglang":       `python3 -c "import sglang; print(sglang.__version__)"`,
	"trtllm":       `python3 -c "import tensorrt_llm; print(tensorrt_llm.__version__)"`,
	"transformers": `python3 -c "import transformers; print(transformers.__version__)"`,
}

// APIGaps says, per engine kind, what its OpenAI API lacks compared with vLLM's: the run records it
// with the model and the report shows it, so a parameter the engine refuses (HTTP 400 naming it) is
// read as unsupported, not as a fault of the machine.
var APIGaps = map[string]string{
	"transformers": "gpuvet's transformers front lacks, compared with vLLM: n > 1 and best_of, logprobs, echo, " +
		"stop strings and stop_token_ids, tools and response_format, logit_bias and penalties, per-request sampling " +
		"(greedy only: temperature 0, top_p 1), batched prompts, prefix caching and tensor parallelism; " +
		"each is refused with HTTP 400 naming the parameter",
}

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

func (v Vars) table() map[string]string {
	gpus := make([]string, len(v.GPUs))
	for i, g := range v.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	return map[string]string{
		"{model}":                  v.Model,
		"{port}":                   strconv.Itoa(v.Port),
		"{gpu}":                    strings.Join(gpus, ","),
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
	for i, w := range words {
		for k, val := range tab {
			w = strings.ReplaceAll(w, k, val)
		}
		if a := strings.Index(w, "{"); a >= 0 {
			if b := strings.Index(w[a:], "}"); b > 0 && isPlaceholder(w[a+1:a+b]) {
				return nil, fmt.Errorf("unknown placeholder %s in %q; known: {model} {port} {gpu} {tp} {max_model_len} {gpu_memory_utilization} {front}", w[a:a+b+1], tmpl)
			}
		}
		words[i] = w
	}
	return words, nil
}

func isPlaceholder(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

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
			cur.WriteByte(s[i])
			inWord = true
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unclosed %c quote in command %q", c, s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
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
