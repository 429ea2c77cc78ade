package results

// Occupancy is what a GPU showed besides gpuvet at one moment: the processes the driver lists on it,
// the memory in use, its utilisation and power. Pointers are nil when the source could not read them.
type Occupancy struct {
	// Processes lists every compute and graphics process the driver reports on the GPU (gpuvet's own
	// and its engine's marked Own). Nil with ProcessesListed false: the source cannot list them.
	Processes       []GPUProcess `json:"processes,omitempty"`
	ProcessesListed bool         `json:"processes_listed"`
	MemoryUsedMiB   *int64       `json:"memory_used_mib,omitempty"`
	UtilPct         *int         `json:"util_pct,omitempty"`
	PowerW          *float64     `json:"power_w,omitempty"`
	PowerLimitW     *float64     `json:"power_limit_w,omitempty"`
	// Samples is how many readings the figures are the least of (utilisation and power settle
	// within a second after a load; a co-tenant's do not).
	Samples int `json:"samples,omitempty"`
	// Notes say what could not be read, e.g. "nvmlDeviceGetComputeRunningProcesses: not supported".
	Notes []string `json:"notes,omitempty"`
}

// GPUProcess is one process the driver lists on a GPU.
type GPUProcess struct {
	PID     int    `json:"pid"`
	Name    string `json:"name,omitempty"`     // /proc/PID/comm, or nvidia-smi's process_name
	Type    string `json:"type,omitempty"`     // "compute", "graphics"
	UsedMiB *int64 `json:"used_mib,omitempty"` // nil: not reported (e.g. under MIG or in a VM)
	// Own: gpuvet itself or a process it started (its engine and the engine's workers).
	Own bool `json:"own,omitempty"`
	// Hidden: the PID is not in this PID namespace (another container or the host).
	Hidden bool `json:"hidden,omitempty"`
}

// Busy says a GPU was not gpuvet's alone when it was measured: another process on it, or load no
// process of gpuvet's accounts for. Its figures cannot pass a gate or a comparison unless Allowed.
type Busy struct {
	// When: "health" (before the benchmarks), "before the engine", "during the load".
	When string `json:"when"`
	// T is the time into the load's power samples when it was first seen (during the load).
	T *float64 `json:"t,omitempty"`
	// Rung is the load rung running then (0-based; nil: before the load or unknown).
	Rung *int `json:"rung,omitempty"`
	// Reason is the one line said to the operator: "busy: PID 4242 python3, 8.1 GiB".
	Reason    string    `json:"reason"`
	Occupancy Occupancy `json:"occupancy"`
	// Allowed: --allow-busy (health.allow_busy) was set; the GPU is noted, not flagged.
	Allowed bool `json:"allowed,omitempty"`
}
