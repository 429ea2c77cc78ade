package results

// ParallelChoice is what run.parallel_gpus resolved to and why.
type ParallelChoice struct {
	// Mode is "auto" (gpuvet chose from the CPU it has) or "fixed" (the plan gave the count).
	Mode string `json:"mode"`
	// GPUs is how many engines were loaded at once; Slots how many there were to load.
	GPUs  int `json:"gpus"`
	Slots int `json:"slots"`
	// Reason is one line a person can read: the figures below, and what limited the choice.
	Reason string `json:"reason"`
	// FreeCores is the CPU gpuvet may use (the fewest of its affinity mask and its cgroup's
	// quota); CoresSource says where each figure came from.
	FreeCores   float64 `json:"free_cores,omitempty"`
	CoresSource string  `json:"cores_source,omitempty"`
	// TokenCostUs is the CPU the load generator spends per streamed token, in µs, measured at the
	// start of the run (CostSource says how).
	TokenCostUs float64 `json:"token_cost_us,omitempty"`
	CostSource  string  `json:"cost_source,omitempty"`
	// DemandTokS is the most output tok/s one engine can ask the client to read (DemandSource says
	// from what); CoresPerGPU = DemandTokS × TokenCostUs.
	DemandTokS   float64 `json:"demand_tok_s,omitempty"`
	DemandSource string  `json:"demand_source,omitempty"`
	CoresPerGPU  float64 `json:"cores_per_gpu,omitempty"`
	// Budget is the share of FreeCores the chosen engines may use together.
	Budget float64 `json:"budget,omitempty"`
}

// Timing is a run's time-to-vet: its wall time and each phase's, in the order they ran.
type Timing struct {
	TotalSeconds float64     `json:"total_seconds"`
	Phases       []PhaseTime `json:"phases"`
}

// PhaseTime is the wall time of one phase or step.
type PhaseTime struct {
	Phase   string  `json:"phase"` // discover, health, models, baseline, judge; health steps: benchmarks (one GPU at a time) or gemm_hbm and pcie, peer_copy, all_reduce, burn, dcgm
	Seconds float64 `json:"seconds"`
	// Schedule says how the step ran across GPUs: "8 GPUs at once", "one GPU at a time", "4 rounds
	// of pairs that share no link".
	Schedule string `json:"schedule,omitempty"`
}

// EndpointTiming is one engine's wall time, phase by phase (its share of the time-to-vet).
type EndpointTiming struct {
	TotalSeconds      float64 `json:"total_seconds"`
	ServeSeconds      float64 `json:"serve_seconds,omitempty"`
	WarmupSeconds     float64 `json:"warmup_seconds,omitempty"`
	LoadSeconds       float64 `json:"load_seconds,omitempty"`
	FunctionalSeconds float64 `json:"functional_seconds,omitempty"`
}
