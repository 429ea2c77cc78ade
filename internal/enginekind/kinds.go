// Package enginekind is the one table of what an engine kind is: how it is launched, how its
// version is read, what its OpenAI API lacks, its container image, whether it loads hub weights,
// the Prometheus gauges it exports, and whether Dynamo serves it. Every place that needs per-kind
// knowledge reads it here: config's validation, the engine launcher, the model cache, the load
// generator's /metrics scrape, the Kubernetes backend and the CLI's help. It imports nothing, so
// every layer may read it. Adding an engine kind is one entry in Kinds (and its tests).
package enginekind

import (
	"cmp"
	"strings"
)

// Kind is one engine kind.
type Kind struct {
	Name string
	// Template is the built-in launch command line ("": engine.command is required). Placeholders:
	// {model} {port} {gpu} {tp} {max_model_len} {gpu_memory_utilization} {front} (the path of
	// gpuvet's transformers front script). The launcher splits it into words before substitution
	// and runs it without a shell, so a value can never inject a command.
	Template string
	// VersionCommand prints the engine's version on stdout ("": engine.version_command is required).
	VersionCommand string
	// APIGaps says what its OpenAI API lacks compared with vLLM's: the run records it with the model
	// and the report shows it, so a parameter the engine refuses (HTTP 400 naming it) is read as
	// unsupported, not as a fault of the machine.
	APIGaps string
	// Image is the engine's container image at a version ("" or "latest": the latest tag); nil:
	// none, the Kubernetes backend needs --engine-image.
	Image func(version string) string
	// HubWeights: the engine loads Hugging Face hub weights, so model_cache.dir auto means the
	// hub's default cache (a generic command may load none).
	HubWeights bool
	// Gauges are the server-side Prometheus gauges it exports, each list in the order tried.
	Gauges Gauges
	// Dynamo: Dynamo's workers serve this kind (kubernetes.dynamo).
	Dynamo bool
	// Modules are the Python modules its template needs importable by python3 in the engine's
	// environment, and Install the command that installs them: the preflight checks them before
	// anything runs and says this command when one is missing.
	Modules []string
	Install string
}

// Gauges name the server-side gauges the load generator scrapes from /metrics.
type Gauges struct {
	Running, Waiting []string // requests running, queued
	KVUsage          []string // KV-cache use, 0..1
	// Counters: prompt tokens looked up in the prefix cache and found there (pairs: the i-th of
	// each is one engine's), and preemptions (KV-cache pressure).
	PrefixQueries, PrefixHits, Preemptions []string
	// CacheInfo: an info metric whose num_gpu_blocks and block_size labels give the engine's
	// KV-cache size (vLLM's cache_config_info).
	CacheInfo []string
}

// Kinds is the table, in the order help texts list them.
var Kinds = []Kind{
	{
		Name: "vllm",
		Template: "vllm serve {model} --host 127.0.0.1 --port {port} --tensor-parallel-size {tp} " +
			"--max-model-len {max_model_len} --gpu-memory-utilization {gpu_memory_utilization}",
		VersionCommand: `python3 -c "import vllm; print(vllm.__version__)"`,
		Image: func(v string) string {
			if v != "" && v != "latest" && !strings.HasPrefix(v, "v") {
				v = "v" + v
			}
			return "vllm/vllm-openai:" + cmp.Or(v, "latest")
		},
		HubWeights: true,
		Gauges: Gauges{Running: []string{"vllm:num_requests_running"}, Waiting: []string{"vllm:num_requests_waiting"},
			KVUsage:       []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
			PrefixQueries: []string{"vllm:prefix_cache_queries_total"}, PrefixHits: []string{"vllm:prefix_cache_hits_total"},
			Preemptions: []string{"vllm:num_preemptions_total"}, CacheInfo: []string{"vllm:cache_config_info"}},
		Dynamo:  true,
		Modules: []string{"vllm"},
		Install: "pip install vllm",
	},
	{
		Name: "sglang",
		Template: "python -m sglang.launch_server --model-path {model} --host 127.0.0.1 --port {port} " +
			"--tp-size {tp} --context-length {max_model_len} --mem-fraction-static {gpu_memory_utilization}",
		VersionCommand: `python3 -c "import sglang; print(sglang.__version__)"`,
		Image:          func(v string) string { return "lmsysorg/sglang:" + cmp.Or(v, "latest") },
		HubWeights:     true,
		Gauges: Gauges{Running: []string{"sglang:num_running_reqs"}, Waiting: []string{"sglang:num_queue_reqs"},
			KVUsage: []string{"sglang:token_usage"},
			// SGLang counts every prompt token, and those its radix cache held (summed over their
			// cache_source); it retracts a request where vLLM preempts one.
			PrefixQueries: []string{"sglang:prompt_tokens_total"}, PrefixHits: []string{"sglang:cached_tokens_total"},
			Preemptions: []string{"sglang:num_retracted_requests_total"}},
		Modules: []string{"sglang"},
		Install: `pip install "sglang[all]"`,
	},
	{
		Name: "trtllm",
		Template: "trtllm-serve {model} --host 127.0.0.1 --port {port} --tp_size {tp} " +
			"--max_seq_len {max_model_len} --kv_cache_free_gpu_memory_fraction {gpu_memory_utilization}",
		VersionCommand: `python3 -c "import tensorrt_llm; print(tensorrt_llm.__version__)"`,
		Image:          func(v string) string { return "nvcr.io/nvidia/tensorrt-llm/release:" + cmp.Or(v, "latest") },
		HubWeights:     true,
		Modules:        []string{"tensorrt_llm"},
		Install:        "pip install tensorrt_llm",
	},
	{
		// gpuvet's own thin OpenAI front (engine/front/transformers_front.py, written next to the
		// engine log as {front}) over transformers' continuous-batching engine. Where
		// transformers[serving] is installed, engine.command can run `transformers serve` instead
		// (see docs/engines.md).
		Name: "transformers",
		Template: "python3 {front} --model {model} --host 127.0.0.1 --port {port} " +
			"--max-model-len {max_model_len} --gpu-memory-utilization {gpu_memory_utilization}",
		VersionCommand: `python3 -c "import transformers; print(transformers.__version__)"`,
		APIGaps: "gpuvet's transformers front lacks, compared with vLLM: n > 1 and best_of, logprobs, echo, " +
			"stop strings and stop_token_ids, tools and response_format, logit_bias and penalties, per-request sampling " +
			"(greedy only: temperature 0, top_p 1), batched prompts, prefix caching and tensor parallelism; " +
			"each is refused with HTTP 400 naming the parameter",
		HubWeights: true,
		// The front exports what transformers' paged cache knows in vLLM's shapes: its blocks in use,
		// the requests it evicted to free blocks (soft reset or CPU offload), and its size.
		Gauges: Gauges{Running: []string{"transformers_cb:num_requests_running"}, Waiting: []string{"transformers_cb:num_requests_waiting"},
			KVUsage: []string{"transformers_cb:kv_cache_usage_perc"}, Preemptions: []string{"transformers_cb:num_preemptions_total"},
			CacheInfo: []string{"transformers_cb:cache_config_info"}},
		// The front's own needs: transformers and torch for the engine, aiohttp for its HTTP server.
		Modules: []string{"transformers", "torch", "aiohttp"},
		Install: "pip install transformers torch aiohttp",
	},
	{
		// Any command, through engine.command; nothing is known about it.
		Name: "generic",
	},
}

// Lookup returns the kind named name.
func Lookup(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Names are the kinds' names, in the table's order.
func Names() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Name
	}
	return out
}

// List says the names for a message or a help text: "vllm, sglang, trtllm, transformers or generic".
func List() string {
	n := Names()
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// AllGauges are every kind's gauges, the kinds in table order: a scrape that does not know the
// server's kind (gpuvet bench) tries them all, the first present wins.
func AllGauges() Gauges {
	var g Gauges
	for _, k := range Kinds {
		g.Running = append(g.Running, k.Gauges.Running...)
		g.Waiting = append(g.Waiting, k.Gauges.Waiting...)
		g.KVUsage = append(g.KVUsage, k.Gauges.KVUsage...)
		g.PrefixQueries = append(g.PrefixQueries, k.Gauges.PrefixQueries...)
		g.PrefixHits = append(g.PrefixHits, k.Gauges.PrefixHits...)
		g.Preemptions = append(g.Preemptions, k.Gauges.Preemptions...)
		g.CacheInfo = append(g.CacheInfo, k.Gauges.CacheInfo...)
	}
	return g
}

// Get returns the kind named name, or a Kind with only its name (nothing known) for any other.
func Get(name string) Kind {
	if k, ok := Lookup(name); ok {
		return k
	}
	return Kind{Name: name}
}
