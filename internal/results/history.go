package results

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// History is what the history store knew of this run's hosts and GPUs when it was judged: each
// node's and GPU's acceptance run (its first ok run under the same plan, or one pinned) with its
// figures, the judge's comparison with them (Drift), and each node's earlier runs (Trend). The
// history package fills Acceptance and Trend, the judge Drift. nil: no history.
type History struct {
	// Store names where the history is kept ("sqlite /path/history.db"), never with a password.
	Store string `json:"store"`
	// Fingerprint is the hash of the plan's measurement-relevant sections: only runs with the same
	// fingerprint are compared (a different load, model or engine measures something else).
	Fingerprint string `json:"fingerprint"`
	// DriftPct is the material margin of a drift (history.drift_pct) and its source.
	DriftPct       float64        `json:"drift_pct,omitempty"`
	DriftPctSource string         `json:"drift_pct_source,omitempty"`
	Acceptance     []Acceptance   `json:"acceptance,omitempty"`
	Drift          []Drift        `json:"drift,omitempty"`
	Trend          []TrendPoint   `json:"trend,omitempty"`
	Notes          []string       `json:"notes,omitempty"`
	Error          string         `json:"error,omitempty"` // the store could not be read or written: a caveat, never a failed run
	Recorded       *RecordedStats `json:"recorded,omitempty"`
}

// RecordedStats says what this run added to the store.
type RecordedStats struct {
	Nodes   int     `json:"nodes"`
	GPUs    int     `json:"gpus"`
	Figures int     `json:"figures"`
	Seconds float64 `json:"seconds"`
}

// Acceptance is one node's or one GPU's reference run and the figures it measured.
type Acceptance struct {
	Scope string `json:"scope"` // "node" or "gpu"
	Host  string `json:"host"`  // the node (for a GPU: the node it was on in the acceptance run)
	// UUID and Serial name a GPU (scope gpu): a GPU is followed by its UUID, so one that moved to
	// another node keeps its acceptance.
	UUID   string    `json:"uuid,omitempty"`
	Serial string    `json:"serial,omitempty"`
	RunID  string    `json:"run_id"`
	At     time.Time `json:"at"`
	// Pinned: the user chose this run (`gpuvet history pin`); else it is the fingerprint's first ok run.
	Pinned bool `json:"pinned,omitempty"`
	// Figures are the acceptance run's figures, for the judge; summary.json does not keep them.
	Figures []StoredFigure `json:"figures,omitempty"`
	// Earlier are the figures of this node's (GPU's) latest ok or inconclusive runs under the
	// fingerprint, newest first: how far each moves from run to run, weighed once there are three.
	Earlier []EarlierRun `json:"earlier,omitempty"`
}

// EarlierRun is one earlier run's figures of a node or GPU.
type EarlierRun struct {
	RunID   string         `json:"run_id"`
	Figures []StoredFigure `json:"figures,omitempty"`
}

// StoredFigure is one key figure as the history keeps it: for a GPU (UUID) and, for an LLM figure,
// a model; with what compare needs to judge it (samples, interval, doubts).
type StoredFigure struct {
	UUID           string    `json:"uuid,omitempty"`
	Model          string    `json:"model,omitempty"` // "": a health figure
	Metric         string    `json:"metric"`
	Unit           string    `json:"unit,omitempty"`
	Value          float64   `json:"value"`
	CI             *Interval `json:"ci,omitempty"`
	Samples        int       `json:"samples,omitempty"`
	HigherIsBetter bool      `json:"higher_is_better"`
	LowerBound     bool      `json:"lower_bound,omitempty"`
	ClientLimited  bool      `json:"client_limited,omitempty"`
	ReqS           float64   `json:"req_s,omitempty"`
	// Judged: the figure is compared with its acceptance (the others are kept for trends).
	Judged bool `json:"judged,omitempty"`
	// SpreadPct is how far the figure spread between this run's blocks (0: one block); not stored.
	SpreadPct float64 `json:"spread_pct,omitempty"`
}

// Drift is one figure of this run against the same figure of its acceptance run.
type Drift struct {
	Scope       string    `json:"scope"` // "node" (the median of its GPUs) or "gpu"
	Host        string    `json:"host"`
	UUID        string    `json:"uuid,omitempty"`
	GPU         int       `json:"gpu"` // index on this run's host (-1 for a node)
	Model       string    `json:"model,omitempty"`
	Metric      string    `json:"metric"`
	Value       float64   `json:"value"`
	ValueCI     *Interval `json:"value_ci,omitempty"`
	Reference   float64   `json:"reference"`
	ReferenceCI *Interval `json:"reference_ci,omitempty"`
	// DeltaPct is how much worse this run is (positive = worse), DeltaCI its interval.
	DeltaPct      float64   `json:"delta_pct"`
	DeltaCI       *Interval `json:"delta_ci,omitempty"`
	DetectablePct float64   `json:"detectable_pct,omitempty"`
	AcceptanceRun string    `json:"acceptance_run"`
	AcceptanceAt  time.Time `json:"acceptance_at"`
	Result        string    `json:"result"` // "pass", "flag", "inconclusive"
	Reason        string    `json:"reason"`
	// OwnRuns and OwnSpreadPct: the earlier runs of this node (GPU) the figure was weighed against, and
	// the half-width (% of their mean) of their 95 % prediction interval of one more run (0: < three).
	OwnRuns      int     `json:"own_runs,omitempty"`
	OwnSpreadPct float64 `json:"own_spread_pct,omitempty"`
}

// TrendPoint is one earlier run of a node (or this one): its status and headline figures, each the
// median over the node's GPUs.
type TrendPoint struct {
	Host    string             `json:"host"`
	RunID   string             `json:"run_id"`
	At      time.Time          `json:"at"`
	Status  Status             `json:"status"`
	Action  string             `json:"action,omitempty"` // what its findings asked for (Host.Action, GPUVerdict.Action)
	Figures map[string]float64 `json:"figures"`          // "MODEL metric" or "metric" (health) -> value
	// Other: a run under another plan fingerprint, shown but never compared.
	Other bool `json:"other_plan,omitempty"`
}

// TrendMetrics are the figures a trend shows, in this order (the judge's metric names: health
// microbenchmarks and burn, then per model the throughputs, the latencies, energy and % SOL).
var TrendMetrics = []string{"output_tok_s_peak", "sustained_req_s", "tpot_p50_ms", "ttft_p95_ms", "itl_p95_ms",
	"tokens_per_joule", "power_mean_w", "sol_pct", "gemm_bf16", "hbm_d2d", "pcie_h2d", "burn_tflops", "burn_min_sm_clock_mhz"}

// TrendKeys are the figure keys ("MODEL metric" or "metric") of points that TrendMetrics names, in
// its order (then by key); with one model only, short drops the model from each label.
func TrendKeys(pts []TrendPoint) (keys, labels []string) {
	rank := map[string]int{}
	for i, m := range TrendMetrics {
		rank[m] = i
	}
	metric := func(k string) string { return k[strings.LastIndex(k, " ")+1:] }
	seen, models := map[string]bool{}, map[string]bool{}
	for _, p := range pts {
		for k := range p.Figures {
			if _, ok := rank[metric(k)]; ok && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
				if i := strings.LastIndex(k, " "); i > 0 {
					models[k[:i]] = true
				}
			}
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(rank[metric(a)]-rank[metric(b)], strings.Compare(a, b)) })
	for _, k := range keys {
		if len(models) <= 1 {
			k = metric(k)
		}
		labels = append(labels, k)
	}
	return keys, labels
}
