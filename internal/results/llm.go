package results

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes as a Go duration string ("20s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"20s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Model is one model served on a host: one Endpoint per GPU (or per group of tp GPUs).
type Model struct {
	Model       string     `json:"model"` // exact model id, e.g. "Qwen/Qwen3-8B": the reference-table key
	Engine      EngineInfo `json:"engine"`
	Endpoints   []Endpoint `json:"endpoints"`
	Comparisons []Compare  `json:"comparisons,omitempty"` // GPU-to-GPU across this model's endpoints
	Status      Status     `json:"status"`
	Flags       []Flag     `json:"flags,omitempty"`
	Notes       []string   `json:"notes,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// EngineInfo says what served the model and how it was started (secrets redacted).
type EngineInfo struct {
	Kind    string `json:"kind"` // "vllm", "sglang", "trtllm", "transformers", "generic", "endpoint", "sim"
	Version string `json:"version,omitempty"`
	Command string `json:"command,omitempty"` // the launch command line, secrets redacted
	TP      int    `json:"tp,omitempty"`
}

// Endpoint is one served engine (one GPU, or one tp group) and everything measured against it.
type Endpoint struct {
	GPUs    []int  `json:"gpus"`               // GPU indexes the engine ran on
	GPUName string `json:"gpu_name,omitempty"` // exact name, for the reference table
	URL     string `json:"url,omitempty"`
	Binding string `json:"binding,omitempty"` // numactl binding of engine and load, or why none
	// ProvisionSeconds is engine start -> first real completion (informational, never gated).
	ProvisionSeconds float64       `json:"provision_seconds,omitempty"`
	Load             *Load         `json:"load,omitempty"`
	Functional       *Functional   `json:"functional,omitempty"`
	Power            *Power        `json:"power,omitempty"`
	SpeedOfLight     *SpeedOfLight `json:"speed_of_light,omitempty"`
	Verdicts         []Verdict     `json:"verdicts,omitempty"`
	RawLoadFile      string        `json:"raw_load_file,omitempty"` // relative to the summary's directory
	LogFile          string        `json:"log_file,omitempty"`
	LogTail          string        `json:"log_tail,omitempty"` // on failure: the end of the engine log, redacted
	Status           Status        `json:"status"`
	Flags            []Flag        `json:"flags,omitempty"`
	Error            string        `json:"error,omitempty"`
	// ErrorLayer is Error's layer when its maker knows it (a backend's Job: LayerInfra); empty: the
	// judge reads it from the words (the engine's, unless they name a GPU fault).
	ErrorLayer string `json:"error_layer,omitempty"`
	// Disruption says what stopped the engine or its load that is not the hardware's (its pod
	// preempted or evicted): the endpoint is then inconclusive, not failed (DisruptionOf).
	Disruption string `json:"disruption,omitempty"`
	// Busy lists when the endpoint's GPUs were found shared (before the engine, during the load):
	// its figures then cannot pass a gate or a comparison.
	Busy []Busy `json:"busy,omitempty"`
	// Telemetry is each GPU's own telemetry during the load, aligned to the rungs.
	Telemetry *Telemetry      `json:"telemetry,omitempty"`
	Timing    *EndpointTiming `json:"timing,omitempty"` // this engine's wall time, phase by phase
	// EngineExit says how the engine process ended while it was measured ("exit status 1"); "": still
	// running when the load ended (or the backend cannot tell).
	EngineExit string `json:"engine_exit,omitempty"`
	// Faults name the layer of the endpoint's failed requests, each with its evidence (faults.go).
	Faults []Fault `json:"faults,omitempty"`
}

// LoadConfig is the load profile, recorded so comparisons can caveat a different one.
type LoadConfig struct {
	Profile      string `json:"profile"` // sweep, synchronous, concurrency, constant, poisson, throughput
	API          string `json:"api"`     // chat or completions
	PromptTokens int    `json:"prompt_tokens"`
	PromptStdev  int    `json:"prompt_tokens_stdev,omitempty"`
	PromptMin    int    `json:"prompt_tokens_min,omitempty"` // clamp of the length distribution
	PromptMax    int    `json:"prompt_tokens_max,omitempty"`
	// PrefixCount × PrefixTokens: shared-prefix prompts (prompt i starts with prefix i % PrefixCount).
	PrefixCount    int      `json:"prefix_count,omitempty"`
	PrefixTokens   int      `json:"prefix_tokens,omitempty"`
	OutputTokens   int      `json:"output_tokens"`
	MaxConcurrency int      `json:"max_concurrency,omitempty"`
	Concurrency    int      `json:"concurrency,omitempty"`
	Rate           float64  `json:"rate,omitempty"`
	Rates          int      `json:"rates,omitempty"` // sweep rungs
	MaxDuration    Duration `json:"max_duration,omitempty"`
	MaxRequests    int      `json:"max_requests,omitempty"`
	Warmup         string   `json:"warmup,omitempty"` // "1" (requests) or "5s"
	Data           string   `json:"data,omitempty"`   // "synthetic", or the file
	// Workload is what the prompts are (docs/workloads.md): "synthetic", "shared-prefix", "trace" (a
	// Mooncake-format Trace replayed at its arrival times, TraceSpeed times as fast), "multi-turn".
	Workload   string  `json:"workload,omitempty"`
	Trace      string  `json:"trace,omitempty"`
	TraceSpeed float64 `json:"trace_speed,omitempty"`
	// ContextMax is a long-context ladder's top context length (0: the server's max_model_len).
	ContextMax int `json:"context_max,omitempty"`
	// Turns is a multi-turn workload's turns per session: each turn's request carries the earlier ones.
	Turns int   `json:"turns,omitempty"`
	Seed  int64 `json:"seed,omitempty"`
	// Reader reads the streamed responses: auto (the event loop for plain http on Linux, else
	// net/http), eventloop or nethttp. ClientCheck.Reader says which one did.
	Reader string `json:"reader,omitempty"`
	// A rung whose latency figures are gated runs past MaxDuration until MinSamples requests
	// completed, at most MaxRungDuration, else it is cut (Run.Sizing); the sweep's probes and
	// constant rungs run until their steady state held what their figures need (Run.Steady).
	MinSamples      int      `json:"min_samples,omitempty"`
	MaxRungDuration Duration `json:"max_rung_duration,omitempty"`
	// TimeBudget is what a sweep plans its rungs against, per endpoint: past it the knee search
	// probes no further and the ladder holds fewer rates (at least five), never climbs nor reruns.
	// A plan, not a cap: no rung is cut by it (Knee.Plan says what it left out).
	TimeBudget Duration `json:"time_budget,omitempty"`
}

// Load is the result of one load profile against one endpoint.
type Load struct {
	Config LoadConfig `json:"config"`
	Model  string     `json:"model"`
	URL    string     `json:"url"`
	// TokenCounts says how prompt lengths were made exact: "tokenizer.json (<path>)" (for chat, then
	// the template's share from the server), "server /tokenize", "usage-calibrated".
	TokenCounts string `json:"token_counts"`
	// PromptSalt, drawn per load, is mixed into its prompt words (not their lengths), so a long-lived
	// engine's prefix cache never holds them from an earlier load. Seed, salt and index reproduce one.
	PromptSalt uint64 `json:"prompt_salt,omitempty"`
	// OutputCounts says where output token counts came from: "usage", "continuous_usage_stats", "tokenizer", "chunks".
	OutputCounts string `json:"output_counts,omitempty"`
	// DroppedParams lists optional request parameters the endpoint refused with HTTP 400 and gpuvet
	// stopped sending: "stream_options.continuous_usage_stats", "min_tokens+ignore_eos", "stream_options".
	DroppedParams []string `json:"dropped_params,omitempty"`
	Runs          []Run    `json:"runs"`
	// Context is a long-context workload's ladder (nil: another workload).
	Context *ContextLadder `json:"context,omitempty"`
	// Saturation is set for sweeps: a truncated or unsaturated sweep makes throughput a lower bound.
	Saturation *Saturation `json:"saturation,omitempty"`
	// Retried: the sweep was unsaturated and ran once more; KeptAttempt is 1 or 2.
	Retried     bool `json:"retried,omitempty"`
	KeptAttempt int  `json:"kept_attempt,omitempty"`
	// PeakOutputTokS is the best output tok/s of any rung; SustainedReqS = PeakOutputTokS ÷ mean output
	// tokens per request (the seed's throughput_req_s_mean); BurstReqS, a short window's, is never gated.
	PeakOutputTokS float64        `json:"peak_output_tok_s"`
	SustainedReqS  float64        `json:"sustained_req_s"`
	BurstReqS      float64        `json:"burst_req_s,omitempty"`
	Client         ClientCheck    `json:"client"`
	Server         *ServerMetrics `json:"server_metrics,omitempty"`
	Interrupted    bool           `json:"interrupted,omitempty"` // stopped by Ctrl-C: what was measured is kept
	// StartedAt is the wall-clock time the load's clock started (Run.WindowStartS counts from it).
	StartedAt time.Time `json:"started_at,omitzero"`
	Error     string    `json:"error,omitempty"`
}

// Run is one rung of a profile: a fixed concurrency or rate for a bounded time or request count.
type Run struct {
	Kind        string  `json:"kind"` // synchronous, throughput, constant, poisson, concurrency
	Concurrency int     `json:"concurrency,omitempty"`
	TargetRate  float64 `json:"target_rate,omitempty"` // req/s for constant and poisson
	// Window is the measured window (warm-up excluded, tail drained).
	WindowSeconds float64 `json:"window_seconds"`
	// EndedBy is what ended the rung: "max_requests", "max_duration", "interrupted", "errors" (ErrorStop).
	EndedBy  string         `json:"ended_by,omitempty"`
	Requests RequestCounts  `json:"requests"`
	Errors   map[string]int `json:"errors,omitempty"` // by class: "http_429", "http_500", "timeout", "cut_stream", "malformed_chunk", "short_output", "connect"
	TTFT     Dist           `json:"ttft_ms"`
	// TTFTFromSchedule: open loop only, from the scheduled send time (coordinated omission shown).
	TTFTFromSchedule *Dist `json:"ttft_from_schedule_ms,omitempty"`
	// A reasoning model's answers (nil when none reasoned): TTFO is the time to the first output token
	// past the reasoning (TTFT: of any kind), Reasoning from the first reasoning token to it.
	TTFO             *Dist   `json:"ttfo_ms,omitempty"`
	Reasoning        *Dist   `json:"reasoning_ms,omitempty"`
	ITL              Dist    `json:"itl_ms"`
	TPOT             Dist    `json:"tpot_ms"`
	E2E              Dist    `json:"e2e_ms"`
	OutputTokS       float64 `json:"output_tok_s"`
	TotalTokS        float64 `json:"total_tok_s"`
	ReqS             float64 `json:"req_s"`
	MeanOutputTokens float64 `json:"mean_output_tokens"`
	MeanPromptTokens float64 `json:"mean_prompt_tokens"`
	// Goodput is req/s of requests that met every SLO in --slo (nil when no SLO was given).
	Goodput       *float64 `json:"goodput_req_s,omitempty"`
	ClientLag     Dist     `json:"client_lag_ms"` // how far behind schedule the client sent
	ClientLimited bool     `json:"client_limited,omitempty"`
	ClientReason  string   `json:"client_limited_reason,omitempty"`
	// ServerRefusing: the server refused or was slow to accept connections (file descriptors, accept
	// backlog): the delay is the server's, never client lag. ServerReason says how.
	ServerRefusing bool   `json:"server_refusing,omitempty"`
	ServerReason   string `json:"server_refusing_reason,omitempty"`
	// TokenBursts says when the server's token timing came in bursts (several chunks in one read,
	// the server or a proxy behind its own schedule): ITL and TPOT then measure the buffering.
	TokenBursts string     `json:"token_bursts,omitempty"`
	CI          *Intervals `json:"ci,omitempty"`
	// WindowStartS is when the measured window opened, in seconds since Load.StartedAt (for engine logs).
	WindowStartS float64 `json:"window_start_s,omitempty"`
	// Sizing says how the rung's length was set when it was sized by completions (nil: by time only).
	Sizing *RungSizing `json:"sizing,omitempty"`
	// Steady says how a sweep's probe or constant rung found its steady state (nil: not tested).
	Steady *RungSteady `json:"steady,omitempty"`
	// LatencyFrom says where a steady rung's latency figures come from when not from the requests sent
	// in its window (none of which completed in time): those that completed in it; or why there are none.
	LatencyFrom string `json:"latency_from,omitempty"`
	// ErrorStop says why the rung ended early on its errors ("": it did not): more would have failed too.
	ErrorStop string `json:"error_stop,omitempty"`
	// Busy: another process or unexplained load was on the GPU during this rung (the reason).
	Busy string `json:"busy,omitempty"`
	// EngineCPUWaitPct is the share of their runnable time the engine's threads waited for a CPU over
	// the rung (schedstat; nil: not read). High: the host's CPUs, not the GPU, set its pace.
	EngineCPUWaitPct *float64 `json:"engine_cpu_wait_pct,omitempty"`
	// HostCPUPressurePct is the share of the rung in which some task waited for a CPU
	// (/proc/pressure/cpu "some"), read instead where the engine shares the machine, not the process
	// tree (a pod of the same node): nil when not read.
	HostCPUPressurePct *float64 `json:"host_cpu_pressure_pct,omitempty"`
	// Repeat is how the figures repeated between the rung's blocks spread over the load (nil: one).
	Repeat *Repeat `json:"repeat,omitempty"`
	// ErrorSamples are the rung's first failed requests (at most MaxErrorSamples per class): the
	// evidence a fault's layer is named with.
	ErrorSamples []ErrorSample `json:"error_samples,omitempty"`

	// Workload says what fed the rung's prompts ("synthetic (shared prefix 4×384)", "trace conv.jsonl").
	Workload string `json:"workload,omitempty"`
	// Replay is how a trace rung kept the trace's schedule and lengths (nil: not a replay).
	Replay *Replay `json:"replay,omitempty"`
	// A context ladder's rung: every prompt's length, the engine's preemptions and highest KV-cache
	// use (0..1) from its counters (nil: none exported), and the share of /metrics samples in which
	// it held requests waiting while it ran fewer than the rung's streams.
	ContextTokens int      `json:"context_tokens,omitempty"`
	Preemptions   *float64 `json:"preemptions,omitempty"`
	KVUsageMax    *float64 `json:"kv_usage_max,omitempty"`
	HeldShare     *float64 `json:"held_share,omitempty"`
}

// KVBound says whether a ladder's rung ran out of KV cache: the engine preempted, or, as an
// engine that queues instead does (transformers' on the H200), held requests waiting most of the
// rung with its cache at least half full (a cap on running requests holds them at any cache use).
func (r Run) KVBound() bool {
	if r.Preemptions != nil && *r.Preemptions > 0 {
		return true
	}
	return r.HeldShare != nil && *r.HeldShare >= 0.5 && r.KVUsageMax != nil && *r.KVUsageMax >= 0.5
}

// ContextLadder is what a long-context workload found at Concurrency streams: the longest context
// no rung up to it ran out of KV cache at, the first that did (FirstKVBound, 0: none; FirstPreempting
// where the engine preempted), and the first rung whose Concurrency × (context + output) passes the
// engine's own KV-cache size (KVCapacityTokens, 0: unknown).
type ContextLadder struct {
	Concurrency             int    `json:"concurrency"`
	LongestClean            int    `json:"longest_clean_tokens"`
	FirstKVBound            int    `json:"first_kv_bound_tokens,omitempty"`
	FirstPreempting         int    `json:"first_preempting_tokens,omitempty"`
	KVCapacityTokens        int    `json:"kv_capacity_tokens,omitempty"`
	ExpectedFirstPreempting int    `json:"expected_first_preempting_tokens,omitempty"`
	Note                    string `json:"note,omitempty"`
}

// Replay is a trace replay's fidelity: requests and span sent against planned, how late requests
// were sent, and how many prompts the server counted at exactly the trace's input length.
type Replay struct {
	Planned        int     `json:"planned"`
	Sent           int     `json:"sent"`
	PlannedSpanS   float64 `json:"planned_span_s"`
	SentSpanS      float64 `json:"sent_span_s"`
	SpanErrorPct   float64 `json:"span_error_pct"` // (sent − planned) ÷ planned span × 100
	LagP99Ms       float64 `json:"lag_p99_ms"`
	LagMaxMs       float64 `json:"lag_max_ms"`
	PromptsExact   int     `json:"prompts_exact"`   // server's prompt count = the trace's input length
	PromptsCounted int     `json:"prompts_counted"` // prompts the server counted (usage)
}

// Repeat is a rung measured in Blocks blocks spread over the load: each block's start (seconds since
// Load.StartedAt) and each gated figure's value in every block. The rung's figures pool the blocks.
type Repeat struct {
	Blocks int       `json:"blocks"`
	StartS []float64 `json:"start_s"`
	// WindowStartS and WindowSeconds are each block's measuring window (as Run.WindowStartS): the
	// pooled run's window_seconds is their sum, and an engine's log is read over them alone.
	WindowStartS  []float64      `json:"window_start_s,omitempty"`
	WindowSeconds []float64      `json:"window_seconds,omitempty"`
	Figures       []FigureRepeat `json:"figures"`
	// CI are the run's intervals widened to cover the spread between its blocks (batch means):
	// what a rerun of the figure would see, for its gates and its history. Run.CI keeps the spread
	// between requests alone, for comparisons of GPUs loaded at once (the drift was theirs alike).
	CI *Intervals `json:"ci,omitempty"`
}

// Ref is where the interval of the figure named by its JSON key ("ttft_p95_ms", …) is kept (nil:
// no such figure): Get reads it, the load generator writes through it.
func (c *Intervals) Ref(key string) **Interval {
	return map[string]**Interval{
		"ttft_p95_ms": &c.TTFTP95, "ttft_p99_ms": &c.TTFTP99, "itl_p95_ms": &c.ITLP95,
		"output_tok_s": &c.OutputTokS, "tpot_p95_ms": &c.TPOTP95, "tpot_p50_ms": &c.TPOTP50,
	}[key]
}

// Get is the interval of the figure named by its JSON key (nil: none).
func (c *Intervals) Get(key string) *Interval {
	if c == nil {
		return nil
	}
	if p := c.Ref(key); p != nil {
		return *p
	}
	return nil
}

// Interval is the interval across runs of the figure named by its JSON key (Repeat.CI; nil: none,
// or not measured in blocks).
func (r *Repeat) Interval(key string) *Interval {
	if r == nil {
		return nil
	}
	return r.CI.Get(key)
}

// AcrossRuns is the interval of the run's figure key that covers what a rerun would see: the
// blocks' (Repeat.CI) where the run was measured in blocks, else the interval over its requests.
func (r *Run) AcrossRuns(key string) *Interval {
	if ci := r.Repeat.Interval(key); ci != nil {
		return ci
	}
	return r.CI.Get(key)
}

// FigureRepeat is one figure's value in each block and how far they spread: (max − min) as a
// percentage of the figure over all blocks.
type FigureRepeat struct {
	Figure    string    `json:"figure"` // the Intervals key, e.g. "ttft_p95_ms"
	Blocks    []float64 `json:"blocks"`
	SpreadPct float64   `json:"spread_pct"`
}

// Figure is the repeat of figure ("ttft_p95_ms", …; nil: not measured in blocks).
func (r *Repeat) Figure(figure string) *FigureRepeat {
	if r == nil {
		return nil
	}
	for i := range r.Figures {
		if r.Figures[i].Figure == figure {
			return &r.Figures[i]
		}
	}
	return nil
}

// RungSizing is how a rung sized by completions ran: until MinSamples completed, or the cap.
type RungSizing struct {
	MinSamples int      `json:"min_samples"`
	Cap        Duration `json:"max_rung_duration"`
	Completed  int      `json:"completed"` // measured requests completed when dispatch stopped
	// Cut: the cap ended the rung before MinSamples completed; its figures are inconclusive.
	Cut    bool   `json:"cut,omitempty"`
	Reason string `json:"reason"`
	// ShortOutputTokens: a synchronous rung whose full-length requests would not give MinSamples in
	// its window asked, after its warm-up, for this many output tokens (the same prompt and prefill:
	// the TTFT and ITL samples it needs, sooner); ShortRequests did. 0: every request asked in full.
	ShortOutputTokens int `json:"short_output_tokens,omitempty"`
	ShortRequests     int `json:"short_requests,omitempty"`
}

// RungSteady is how a rung measured in its steady state ran: its window opens once the in-flight
// count and the output rate levelled, and it runs until the window holds what its figures need, at
// least PlannedS and at most load.max_rung_duration.
type RungSteady struct {
	// PlannedS is the least length the rung was given: the time per request at its load, from the
	// earlier rungs, plus a window.
	PlannedS float64  `json:"planned_s"`
	Cap      Duration `json:"max_rung_duration"`
	// OnsetS is when the plateau began, in seconds from the rung's start (0 with Transient).
	OnsetS float64 `json:"onset_s,omitempty"`
	// Queue: past the engine's capacity, the output rate levelled while the in-flight count still
	// grew (an open loop's queue): its tok/s is the capacity, its latencies grow with the queue.
	Queue bool `json:"queue,omitempty"`
	// Transient: the rung never levelled (or its level held too few completions) within the cap:
	// its figures are those of a ramp, and it decides no gate. Reason says what was missing.
	Transient bool   `json:"transient,omitempty"`
	Reason    string `json:"reason"`
}

// RequestCounts counts requests in the measured window.
type RequestCounts struct {
	Successful int `json:"successful"`
	Errored    int `json:"errored"`
	Incomplete int `json:"incomplete"` // cut by the end of the window / drain bound
	Warmup     int `json:"warmup"`     // excluded
	// Streamed is how many measured requests streamed tokens inside the window, complete or not:
	// the requests behind the rung's output tok/s (which counts every token received in it).
	Streamed int `json:"streamed,omitempty"`
}

// Dist is a distribution in a unit given by the field name (ms unless said otherwise).
// Every percentile carries its sample count: a p99 of 5 samples is not a p99.
type Dist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

// Interval is a bootstrap confidence interval.
type Interval struct {
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Level float64 `json:"level"` // 0.95
}

// Intervals holds the confidence intervals of the gated figures of a run.
type Intervals struct {
	TTFTP95    *Interval `json:"ttft_p95_ms,omitempty"`
	TTFTP99    *Interval `json:"ttft_p99_ms,omitempty"`
	ITLP95     *Interval `json:"itl_p95_ms,omitempty"`
	OutputTokS *Interval `json:"output_tok_s,omitempty"`
	// TPOTP95 and TPOTP50 are the bootstrap intervals of the TPOT p95 and median (per-request
	// TPOTs), which GPU-to-GPU comparisons judge by the interval rule (issue 35).
	TPOTP95 *Interval `json:"tpot_p95_ms,omitempty"`
	TPOTP50 *Interval `json:"tpot_p50_ms,omitempty"`
}

// Saturation is the seed's sweep analysis. Either flag makes throughput a lower bound.
type Saturation struct {
	Truncated   bool      `json:"truncated"`
	Unsaturated bool      `json:"unsaturated"`
	Peak        float64   `json:"peak_output_tok_s"`  // saturated peak (the throughput probe)
	Rungs       []float64 `json:"rungs_output_tok_s"` // constant rungs, in order
	Reason      string    `json:"reason,omitempty"`
	// Knee is the search for the concurrency where output tok/s stops growing (nil: not searched).
	Knee *Knee `json:"knee,omitempty"`
}

// Knee records how a sweep raised its throughput probe: doubling concurrency from max_concurrency while
// output tok/s grew, up to the engine's max_num_seqs; the constant rungs then reach the best probe's rate.
type Knee struct {
	Probes      []KneeProbe `json:"probes"`
	Concurrency int         `json:"concurrency"` // the best probe's, which the ladder tops at
	Limit       int         `json:"limit"`       // the most concurrency the search could reach
	LimitSource string      `json:"limit_source"`
	Reason      string      `json:"reason"` // why the search stopped
	// LadderTopReqS is the top constant rung's rate: a little past the best probe's, to show the plateau.
	LadderTopReqS float64 `json:"ladder_top_req_s"`
	// LadderFootReqS is the rate the ladder climbs from: the synchronous rung's first block's rate.
	LadderFootReqS float64 `json:"ladder_foot_req_s,omitempty"`
	// ClimbedRungs is how many rungs went on past the planned top because the ladder still climbed.
	ClimbedRungs int `json:"climbed_rungs,omitempty"`
	// PastKnee: a probe past the knee was measured (its tok/s stopped rising, or it completed nothing:
	// over capacity). A finding, not an error: the sweep is saturated, the rungs sit below the knee.
	PastKnee bool `json:"past_knee,omitempty"`
	// PlannedRates is how many constant rates the ladder planned (load.rates, or fewer to fit
	// load.time_budget); Plan says why when fewer, and what else the budget left out ("": nothing).
	PlannedRates int    `json:"planned_rates,omitempty"`
	Plan         string `json:"plan,omitempty"`
}

// KneeProbe is one throughput probe of the knee search.
type KneeProbe struct {
	Concurrency int     `json:"concurrency"`
	OutputTokS  float64 `json:"output_tok_s"`
	// ServerWaiting is the median of the endpoint's queued requests over the probe (-1: not scraped).
	ServerWaiting float64 `json:"server_waiting"`
	// Completed is how many of its requests completed (0 with tokens streamed: over capacity).
	Completed int `json:"completed"`
}

// LowerBound reports whether throughput from this sweep is only a lower bound.
func (s *Saturation) LowerBound() bool { return s != nil && (s.Truncated || s.Unsaturated) }

// CutReason says why a run's figures are inconclusive by its sizing ("": the rung was not cut).
func (r *Run) CutReason() string {
	if r == nil || r.Sizing == nil || !r.Sizing.Cut {
		return ""
	}
	return r.Sizing.Reason
}

// TransientReason says why a run never reached a steady state ("": it did, or was not tested).
func (r *Run) TransientReason() string {
	if r == nil || r.Steady == nil || !r.Steady.Transient {
		return ""
	}
	return r.Steady.Reason
}

// RungNotes says, one line a rung, which rungs measured less than they were run for: those that
// never reached a steady state (transient) and those their errors ended.
func (l *Load) RungNotes() []string {
	if l == nil {
		return nil
	}
	var out []string
	for i := range l.Runs {
		r := &l.Runs[i]
		what := fmt.Sprintf("rung %d (%s)", i+1, r.Label())
		if why := r.TransientReason(); why != "" {
			out = append(out, what+": "+why)
		}
		if r.ErrorStop != "" {
			out = append(out, what+": "+r.ErrorStop)
		}
	}
	if s := l.Saturation; s != nil && s.Knee != nil && s.Knee.Plan != "" {
		out = append(out, "sweep plan: "+s.Knee.Plan)
	}
	return out
}

// Label names a run by its kind and load: "constant 1.2 req/s", "throughput c=128".
func (r *Run) Label() string {
	if r.TargetRate >= 999.5 { // %.3g would write 1.23e+03
		return fmt.Sprintf("%s %.0f req/s", r.Kind, r.TargetRate)
	}
	if r.TargetRate > 0 {
		return fmt.Sprintf("%s %.3g req/s", r.Kind, r.TargetRate)
	}
	return fmt.Sprintf("%s c=%d", r.Kind, r.Concurrency)
}

// ClientCheck is the load generator's check on itself.
type ClientCheck struct {
	LagP50Ms      float64 `json:"lag_p50_ms"`
	LagP99Ms      float64 `json:"lag_p99_ms"`
	LagMaxMs      float64 `json:"lag_max_ms"`
	CPUPercent    float64 `json:"cpu_percent"` // of one core, mean over the run
	Cores         int     `json:"cores"`
	ClientLimited bool    `json:"client_limited"`
	Reason        string  `json:"reason,omitempty"`
	// ChunkTimes says how chunk arrival times were taken (kernel receive timestamps, or read time and why).
	ChunkTimes string `json:"chunk_times,omitempty"`
	// RXWait is the per-request mean time chunks waited in the socket before the client read them.
	RXWait *Dist `json:"rx_wait_ms,omitempty"`
	// Reader is the reader of streamed responses that ran, and why (the event loop, or net/http).
	Reader string `json:"reader,omitempty"`
}

// ServerMetrics is what the endpoint's /metrics said during the load, over time.
type ServerMetrics struct {
	Source  string         `json:"source"` // the URL scraped
	Samples []ServerSample `json:"samples,omitempty"`
	Error   string         `json:"error,omitempty"`
	// PrefixCache and Preemptions (KV-cache pressure) are the engine's over the load, from its own
	// counters (nil: it exports none).
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`
	Preemptions *float64     `json:"preemptions,omitempty"`
}

// PrefixCache is the engine's prefix-cache hit rate over a load from its counters, beside what an
// ideal cache would have found on the prompts sent (Expected; nil when the workload shares none).
type PrefixCache struct {
	QueriedTokens float64  `json:"queried_tokens"`
	HitTokens     float64  `json:"hit_tokens"`
	HitRate       float64  `json:"hit_rate"` // 0..1
	Expected      *float64 `json:"expected_hit_rate,omitempty"`
}

// ServerSample is one scrape.
type ServerSample struct {
	T            float64 `json:"t"` // seconds since load start
	Running      float64 `json:"running"`
	Waiting      float64 `json:"waiting"`
	KVCacheUsage float64 `json:"kv_cache_usage"` // 0..1
	// The engine's cumulative counters, where it exports them.
	PrefixQueries float64 `json:"prefix_queries,omitempty"`
	PrefixHits    float64 `json:"prefix_hits,omitempty"`
	Preemptions   float64 `json:"preemptions,omitempty"`
}

// Power is NVML sampling during the load of one endpoint.
type Power struct {
	IntervalSeconds float64       `json:"interval_seconds"`
	MeanW           float64       `json:"mean_w"`
	MaxW            float64       `json:"max_w"`
	TokensPerJoule  float64       `json:"tokens_per_joule,omitempty"` // output tokens per joule at peak rung ("tokens per watt·s")
	Samples         []PowerSample `json:"samples,omitempty"`
	Note            string        `json:"note,omitempty"`
}

// SpeedOfLight is the roofline bound of output tok/s for this GPU × model at the engine's batch
// (datasheet HBM bandwidth and BF16 FLOP/s), and the measured peak as a percentage of it.
type SpeedOfLight struct {
	BoundOutputTokS    float64 `json:"bound_output_tok_s"`
	MeasuredOutputTokS float64 `json:"measured_output_tok_s"`
	Percent            float64 `json:"percent"`
	Limit              string  `json:"limit"`         // "memory" or "compute": the side that bounds the step
	Batch              float64 `json:"batch"`         // the batch the bound is taken at: fixed by the plan (the engine's max_num_seqs), not the batch a run reached
	BatchSource        string  `json:"batch_source"`  // how Batch was found
	PromptTokens       float64 `json:"prompt_tokens"` // mean, of the peak run
	OutputTokens       float64 `json:"output_tokens"` // mean, of the peak run
	TP                 int     `json:"tp"`
	GPU                string  `json:"gpu"`   // catalog key of the datasheet used
	Model              string  `json:"model"` // where the architecture came from
	Note               string  `json:"note,omitempty"`
	// ReachedBatch is the peak run's mean requests in flight (Little's law), for reading only.
	ReachedBatch float64 `json:"reached_batch,omitempty"`
	// Impossible: Percent is above 100 (a figure cannot beat its roofline: the datasheet, the model
	// or the measurement is wrong). Marked says why the figure is not the GPU's own (busy, throttled).
	Impossible bool   `json:"impossible,omitempty"`
	Marked     string `json:"marked,omitempty"`
}

// Functional is the API conformance suite against one endpoint. A suite that cannot run is failed.
type Functional struct {
	Status Status           `json:"status"`
	Tests  []FunctionalTest `json:"tests"`
	Error  string           `json:"error,omitempty"`
	// Greedy is what the greedy_outputs case received (nil: not run), compared across the GPUs.
	Greedy *GreedyOutputs `json:"greedy,omitempty"`
}

// FunctionalTest is one conformance check.
type FunctionalTest struct {
	Name   string `json:"name"` // chat_completion, max_tokens_length, stream_done, unknown_model_4xx, context_overflow_4xx, concurrent_isolation
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// Verdict is one gate or rule applied to one figure, recording who decided.
type Verdict struct {
	Check     string   `json:"check"` // "gate.ttft_p95", "gate.itl_p95", "gate.sustained_req_s", "gate.aicr_throughput", "gate.aicr_ttft_p99", …
	Rule      string   `json:"rule"`  // human form, e.g. "sync TTFT p95 ≤ 200 ms"
	Value     *float64 `json:"value,omitempty"`
	Threshold *float64 `json:"threshold,omitempty"`
	Unit      string   `json:"unit,omitempty"`
	Source    string   `json:"source"` // global default, config, reference, accelerator override, recipe
	Result    string   `json:"result"` // "pass", "fail", "inconclusive", "disabled"
	Reason    string   `json:"reason,omitempty"`
}

// SourceNone is the source of a check that had no yardstick at all (no reference entry, no
// calibrated figure, no healthy share measured for the engine). Disabled with it, the check was
// not made: the run is ok on what was judged but partial (Summary.SkippedChecks says so).
const SourceNone = "none"

// BaselineComparison is bare metal vs this run (and, in `gpuvet compare`, more environments).
type BaselineComparison struct {
	BaselineFile string   `json:"baseline_file"`
	Environments []string `json:"environments"` // column order
	// EnvironmentFiles are the files the environments were read from, in the same order (gpuvet compare).
	EnvironmentFiles []string      `json:"environment_files,omitempty"`
	Rows             []OverheadRow `json:"rows,omitempty"`
	Caveats          []string      `json:"caveats,omitempty"`
	Note             string        `json:"note,omitempty"` // e.g. "no comparison: baseline unreadable (…)"
	// TolerancePct is the breach tolerance in force (overhead beyond it breaches), set by TolerancePctSrc.
	TolerancePct    float64 `json:"tolerance_pct,omitempty"`
	TolerancePctSrc string  `json:"tolerance_pct_source,omitempty"`
	// DetectablePct is, per environment and metric, the smallest overhead every row of that metric
	// could have shown as a breach (the largest of the rows' OverheadRow.DetectablePct; issue 35).
	DetectablePct map[string]map[string]float64 `json:"detectable_pct,omitempty"`
}

// OverheadRow is one metric compared across environments.
type OverheadRow struct {
	Subject        string             `json:"subject"` // e.g. "Qwen/Qwen3-8B gpu 0", "gpu 0 sgemm"
	Metric         string             `json:"metric"`
	HigherIsBetter bool               `json:"higher_is_better"`
	Baseline       float64            `json:"baseline"`
	Values         map[string]float64 `json:"values"`       // environment -> value
	OverheadPct    map[string]float64 `json:"overhead_pct"` // positive = worse than baseline
	Status         map[string]string  `json:"status"`       // "ok", "breach", "low_confidence", "lower_bound", "missing"
	// Notes says, per environment, which guard held the call when a status is not a plain ok/breach.
	Notes map[string]string `json:"notes,omitempty"`
	// Per environment: the overhead's interval (its figures' combined) and the smallest overhead this
	// row could have shown as a breach in 80 % of runs; absent where a side has no interval.
	OverheadCI    map[string]*Interval `json:"overhead_ci,omitempty"`
	DetectablePct map[string]float64   `json:"detectable_pct,omitempty"`
}

// ErrorCounts says a run's errors by class, sorted: "http_500=5 timeout=2" ("none" for none); the
// one way every surface prints Run.Errors (never Go's map syntax).
func ErrorCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
