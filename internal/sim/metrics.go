package sim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics holds what /metrics exposes, under vLLM's metric names.
type metrics struct {
	promptTokens   atomic.Int64
	running        atomic.Int64 // fixed mode / handler-level in flight
	mu             sync.Mutex
	succeeded      map[string]int64 // finished_reason -> count
	abortedN       atomic.Int64
	ttft, itl, e2e *histogram
}

func newMetrics() *metrics {
	return &metrics{succeeded: map[string]int64{},
		ttft: newHistogram([]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}),
		itl:  newHistogram([]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
		e2e:  newHistogram([]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}),
	}
}

func (m *metrics) start(prompt int) {
	m.promptTokens.Add(int64(prompt))
	m.running.Add(1)
}

func (m *metrics) success(reason string, e2e time.Duration) {
	m.running.Add(-1)
	m.e2e.observe(e2e.Seconds())
	m.mu.Lock()
	m.succeeded[reason]++
	m.mu.Unlock()
}

func (m *metrics) aborted() {
	m.running.Add(-1)
	m.abortedN.Add(1)
}

type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []int64 // per bucket (not cumulative), last is +Inf
	sum    float64
	n      int64
}

func newHistogram(b []float64) *histogram {
	return &histogram{bounds: b, counts: make([]int64, len(b)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

func (h *histogram) count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func (h *histogram) write(b *strings.Builder, name, help, labels string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i, ub := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %d\n", name, labels, strconv.FormatFloat(ub, 'f', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %g\n%s_count{%s} %d\n", name, labels, cum, name, labels, h.sum, name, labels, h.n)
}

func (s *Server) metricsHandler(w http.ResponseWriter, _ *http.Request) {
	m := s.metrics
	running, waiting, kv := s.drv.stats()
	if s.cfg.Fixed() {
		running = int(m.running.Load())
	}
	var gen, preempt, queries, hits int64
	if rt, ok := s.drv.(*realtime); ok {
		rt.mu.Lock()
		gen, preempt = rt.eng.GenerationTokens, rt.eng.Preemptions
		queries, hits = rt.eng.PrefixQueries, rt.eng.PrefixHits
		rt.mu.Unlock()
	} else { // fixed mode: the ITL histogram counts the gaps, TTFT the first tokens
		gen = m.ttft.count() + m.itl.count()
	}
	lbl := "engine=\"0\",model_name=" + strconv.Quote(s.cfg.Model)
	var b strings.Builder
	metric := func(kind, name, help string, v any) { // %v: a gauge's float as %g, a counter's int as %d
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %v\n", name, help, name, kind, name, lbl, v)
	}
	gauge := func(name, help string, v float64) { metric("gauge", name, help, v) }
	counter := func(name, help string, v int64) { metric("counter", name, help, v) }
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(running))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(waiting))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv)
	gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage (pre-0.10 name). 1 means 100 percent usage.", kv)
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", m.promptTokens.Load())
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", gen)
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", preempt)
	if s.perf != nil { // the KV cache's size, as vLLM labels its cache config
		fmt.Fprintf(&b, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"%d\",enable_prefix_caching=\"%t\",engine=\"0\",num_gpu_blocks=\"%d\"} 1\n",
			s.perf.Cfg.BlockSize, !s.perf.Cfg.NoPrefixCache, s.perf.KVBlocks)
	}
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", queries)
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", hits)
	counter("gpuvet_sim:tokens_behind_schedule_total", "Tokens the simulator sent more than 20 ms after they were due: it could not keep up, clients saw bursts.", s.lag.late.Load())
	gauge("gpuvet_sim:schedule_lag_max_seconds", "The largest lag of a token behind its due time since start.", float64(s.lag.maxNs.Load())/1e9)
	m.mu.Lock()
	fmt.Fprintf(&b, "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n")
	for _, r := range []string{"stop", "length", "abort"} {
		v := m.succeeded[r]
		if r == "abort" {
			v = m.abortedN.Load()
		}
		fmt.Fprintf(&b, "vllm:request_success_total{%s,finished_reason=%q} %d\n", lbl, r, v)
	}
	m.mu.Unlock()
	m.ttft.write(&b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", lbl)
	m.itl.write(&b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", lbl)
	m.itl.write(&b, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds (pre-0.11 name).", lbl)
	m.e2e.write(&b, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lbl)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
