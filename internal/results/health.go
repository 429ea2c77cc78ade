package results

import "time"

// GPUInfo is one GPU's inventory, the same whether read through NVML, a captured
// `nvidia-smi -q -x`, or the simulator's virtual GPUs. Pointers mark values a source may lack:
// nil means "not reported", never zero.
type GPUInfo struct {
	Index             int      `json:"index"`
	Name              string   `json:"name"` // exact nvidia-smi name, e.g. "NVIDIA H200": the reference-table key
	UUID              string   `json:"uuid"`
	Serial            string   `json:"serial,omitempty"`
	PCIBusID          string   `json:"pci_bus_id,omitempty"`
	NUMANode          int      `json:"numa_node"` // -1: unknown (sysfs says -1, e.g. in a VM)
	VBIOS             string   `json:"vbios,omitempty"`
	ComputeCapability string   `json:"compute_capability,omitempty"` // "9.0"
	Architecture      string   `json:"architecture,omitempty"`       // "Hopper"
	MemoryTotalMiB    int64    `json:"memory_total_mib"`
	MemoryUsedMiB     *int64   `json:"memory_used_mib,omitempty"`
	DriverVersion     string   `json:"driver_version,omitempty"`
	CUDAVersion       string   `json:"cuda_version,omitempty"`
	PCIe              PCIeLink `json:"pcie"`
	PowerLimitW       *float64 `json:"power_limit_w,omitempty"`
	PowerDrawW        *float64 `json:"power_draw_w,omitempty"`
	MaxSMClockMHz     *int     `json:"max_sm_clock_mhz,omitempty"`
	SMClockMHz        *int     `json:"sm_clock_mhz,omitempty"`
	TemperatureC      *int     `json:"temperature_c,omitempty"`
	Persistence       *bool    `json:"persistence_mode,omitempty"`
	ECCEnabled        *bool    `json:"ecc_enabled,omitempty"`
	ECC               ECC      `json:"ecc"`
	// RetiredPagesPending is true when retired pages wait for a reset (older GPUs; remapping on newer).
	RetiredPagesPending *bool         `json:"retired_pages_pending,omitempty"`
	RemappedRows        *RemappedRows `json:"remapped_rows,omitempty"`
	ClockEvents         ClockEvents   `json:"clock_events"`
	XIDs                []XIDEvent    `json:"xids,omitempty"`
	// RecoveryAction is what the driver says the GPU needs (NVML's GPU recovery action): a Recovery*
	// value, else the driver's words verbatim; "" when not reported (an older driver).
	RecoveryAction string `json:"recovery_action,omitempty"`
	// Fabric is the GPU's NVLink fabric registration (NVSwitch systems); nil: none to report.
	Fabric *Fabric `json:"fabric,omitempty"`
	// Unsupported lists the fields this source or driver could not give (e.g. "nvmlDeviceGetRemappedRows: not supported").
	Unsupported []string `json:"unsupported,omitempty"`
}

// The GPU recovery actions the driver asks for (NVML_GPU_RECOVERY_ACTION_*), normalized.
const (
	RecoveryNone          = "none"
	RecoveryGPUReset      = "gpu_reset"
	RecoveryNodeReboot    = "node_reboot"
	RecoveryDrainP2P      = "drain_p2p"
	RecoveryDrainAndReset = "drain_and_reset"
)

// Fabric is a GPU's NVLink fabric registration with the fabric manager, in the driver's words
// (nvidia-smi's <fabric>; NVML's nvmlDeviceGetGpuFabricInfoV, written the way nvidia-smi writes it).
type Fabric struct {
	State  string `json:"state"`            // "Not Started", "In Progress", "Completed"
	Status string `json:"status,omitempty"` // "Success", or the error the registration ended with
	Health string `json:"health,omitempty"` // the health summary: "Healthy", "Unhealthy", "Limited Capacity"; "": not reported
}

// The kinds of the NVIDIA driver's kernel-log lines about a GPU (KernelEvent.Kind).
const (
	KernelFallenOffBus  = "fallen_off_bus" // the GPU fell off the bus (also Xid 79)
	KernelRequiresReset = "requires_reset" // "GPU requires reset"
	KernelRmInitFailed  = "rm_init_failed" // RmInitAdapter / rm_init_adapter failed: the driver could not bring the GPU up
	KernelGSPTimeout    = "gsp_timeout"    // the GPU's GSP firmware stopped answering (heartbeat, RPC timeout, Xid 119)
	KernelXID           = "xid"            // any other Xid
)

// KernelEvent is one line the NVIDIA driver wrote to the kernel log about a GPU, since boot.
type KernelEvent struct {
	// Seq is the /dev/kmsg record's sequence number; TimeS the seconds since boot the kernel stamped it with.
	Seq   int64   `json:"seq,omitempty"`
	TimeS float64 `json:"time_s,omitempty"`
	Kind  string  `json:"kind"`
	XID   int     `json:"xid,omitempty"`
	// BusID is the PCI address the line names, as "0000:18:00" (domain:bus:device); "" when it names none.
	BusID string `json:"bus_id,omitempty"`
	// UUID is the GPU the driver named at that address earlier in the log ("NVRM: GPU at PCI:… GPU-…").
	UUID string `json:"uuid,omitempty"`
	Line string `json:"line"`
	// Count is how many lines of this kind (and Xid) the log held for the GPU; the first is kept.
	Count int `json:"count,omitempty"`
}

// KernelLog is what the health phase read of the kernel log: where from, how much, and the driver's
// lines that name no GPU of this host (a GPU the driver lost, a line with no PCI address).
type KernelLog struct {
	Source    string        `json:"source"`              // "/dev/kmsg", "sim"
	Records   int           `json:"records"`             // lines read
	Truncated bool          `json:"truncated,omitempty"` // the read stopped at its bound
	Note      string        `json:"note,omitempty"`      // why it was not read (not root, a container)
	Unmatched []KernelEvent `json:"unmatched,omitempty"`
}

// PCIeLink is the link state; Expected* come from the plan when set (e.g. a riser that is x8 by design).
type PCIeLink struct {
	GenCurrent   int `json:"gen_current,omitempty"`
	GenMax       int `json:"gen_max,omitempty"`
	WidthCurrent int `json:"width_current,omitempty"`
	WidthMax     int `json:"width_max,omitempty"`
}

// ECC holds uncorrected error counts (nil: not reported).
type ECC struct {
	VolatileUncorrected  *int64 `json:"volatile_uncorrected,omitempty"`
	AggregateUncorrected *int64 `json:"aggregate_uncorrected,omitempty"`
	VolatileCorrected    *int64 `json:"volatile_corrected,omitempty"`
	AggregateCorrected   *int64 `json:"aggregate_corrected,omitempty"`
}

// RemappedRows is the row-remapping state of HBM GPUs (A100 and later).
type RemappedRows struct {
	Correctable   int  `json:"correctable"`
	Uncorrectable int  `json:"uncorrectable"`
	Pending       bool `json:"pending"`
	Failure       bool `json:"failure"`
}

// ClockEvents is the clock-event (throttle) reason bitmask and its decoded names.
type ClockEvents struct {
	Mask  uint64   `json:"mask"`
	Names []string `json:"names,omitempty"` // e.g. ["gpu_idle"], ["sw_power_cap"]
}

// XIDEvent is one XID error seen while gpuvet ran.
type XIDEvent struct {
	Time time.Time `json:"time"`
	XID  uint64    `json:"xid"`
	Note string    `json:"note,omitempty"`
}

// Health is the health phase of one host.
type Health struct {
	Source      string      `json:"source"` // "nvml", "nvidia-smi-xml", "sim"
	ExpectGPUs  int         `json:"expect_gpus,omitempty"`
	Parallel    bool        `json:"parallel"` // microbenchmarks ran on all GPUs at once
	GPUs        []GPUHealth `json:"gpus"`
	DCGM        *DCGM       `json:"dcgm,omitempty"`
	Comparisons []Compare   `json:"comparisons,omitempty"` // GPU-to-GPU spread of GEMM / PCIe
	Status      Status      `json:"status"`
	Flags       []Flag      `json:"flags,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
	Error       string      `json:"error,omitempty"`
	// ErrorLayer is Error's layer when its maker knows it (a backend's Job: LayerInfra); empty: the
	// judge reads it from the words (the GPU's when they name a GPU fault, else the host's).
	ErrorLayer string `json:"error_layer,omitempty"`
	// Disruption says what stopped the health phase that is not the hardware's (a pod preempted):
	// the phase is then inconclusive, not failed (DisruptionOf).
	Disruption string `json:"disruption,omitempty"`

	// KernelLog is what was read of the kernel log (nil: the source has none, e.g. a capture).
	KernelLog *KernelLog `json:"kernel_log,omitempty"`
	// Interconnect is the GPUs' NVLink/PCIe topology, peer-to-peer bandwidth and all-reduce (nil: not read).
	Interconnect *Interconnect `json:"interconnect,omitempty"`
	Timing       []PhaseTime   `json:"timing,omitempty"` // each step's wall time and schedule
}

// GPUHealth is one GPU's inventory plus its measured figures.
type GPUHealth struct {
	GPU     GPUInfo      `json:"gpu"`
	Bench   []Microbench `json:"bench,omitempty"`
	Burn    *Burn        `json:"burn,omitempty"`
	Binding string       `json:"binding,omitempty"` // e.g. "numactl --cpunodebind=0 --membind=0", or why none
	Status  Status       `json:"status"`
	Flags   []Flag       `json:"flags,omitempty"`
	Notes   []string     `json:"notes,omitempty"`

	// Busy is set when another process or unexplained load was on the GPU at the health phase: its
	// figures are marked and cannot pass a floor or a comparison.
	Busy *Busy `json:"busy,omitempty"`
	// KernelLog are the NVIDIA driver's kernel-log lines about this GPU since boot, one per kind
	// (and Xid) with its count, at most MaxKernelEvents.
	KernelLog []KernelEvent `json:"kernel_log,omitempty"`
}

// MaxKernelEvents bounds the kernel-log events kept per GPU (and unmatched per host).
const MaxKernelEvents = 16

// Microbench is one measured figure next to the detected GPU's datasheet peak.
type Microbench struct {
	Name   string   `json:"name"`  // one of MicrobenchNames()
	Value  float64  `json:"value"` // in Unit
	Unit   string   `json:"unit"`  // "TFLOP/s", "GB/s"
	Peak   *float64 `json:"peak,omitempty"`
	Ratio  *float64 `json:"ratio,omitempty"` // Value / Peak
	Params string   `json:"params,omitempty"`
	Status Status   `json:"status"`
	Error  string   `json:"error,omitempty"`

	// Floor is the least Ratio a healthy card measures (MicrobenchFloors or the reference table);
	// below it the figure is flagged. Busy: measured while the GPU was not gpuvet's alone.
	Floor *float64 `json:"floor,omitempty"`
	Busy  bool     `json:"busy,omitempty"`
	// Check is the check of the GEMM's answer (GEMMs only; nil: not checked).
	Check *ResultCheck `json:"check,omitempty"`
	// ClockReasons are the clock-event reasons the GPU reported while it ran, gpu_idle aside (the
	// system's power brake among them makes its figure the host's).
	ClockReasons []string `json:"clock_reasons,omitempty"`
}

// Burn summarises a sustained GEMM with 1 Hz NVML sampling.
type Burn struct {
	Duration      Duration      `json:"duration"`
	TFLOPS        float64       `json:"tflops,omitempty"`
	PowerMeanW    float64       `json:"power_mean_w"`
	PowerMaxW     float64       `json:"power_max_w"`
	PowerLimitW   float64       `json:"power_limit_w,omitempty"`
	MinSMClockMHz int           `json:"min_sm_clock_mhz"`
	MaxTempC      int           `json:"max_temp_c"`
	ReasonsSeen   []string      `json:"reasons_seen,omitempty"`
	Samples       []PowerSample `json:"samples,omitempty"`
	Error         string        `json:"error,omitempty"`

	// Peak is the datasheet BF16 TFLOP/s, Ratio = TFLOPS / Peak, Floor the least healthy Ratio.
	Peak  *float64 `json:"peak,omitempty"`
	Ratio *float64 `json:"ratio,omitempty"`
	Floor *float64 `json:"floor,omitempty"`
	// Check is the check of every burn GEMM's answer (nil: not checked).
	Check *ResultCheck `json:"check,omitempty"`
}

// PowerSample is one NVML reading (burn, and power sampling during load).
type PowerSample struct {
	T            float64 `json:"t"` // seconds since the start of sampling
	PowerW       float64 `json:"power_w"`
	SMClockMHz   int     `json:"sm_clock_mhz,omitempty"`
	TempC        int     `json:"temp_c,omitempty"`
	ClockReasons uint64  `json:"clock_reasons,omitempty"`
	UtilPct      int     `json:"util_pct,omitempty"`
	// Telemetry under the load: memory clock, memory controller utilisation, memory in use.
	MemClockMHz int   `json:"mem_clock_mhz,omitempty"`
	MemUtilPct  int   `json:"mem_util_pct,omitempty"`
	MemUsedMiB  int64 `json:"mem_used_mib,omitempty"`
}

// DCGM is the result of `dcgmi diag`.
type DCGM struct {
	Status  Status     `json:"status"` // skipped when dcgmi is not installed: never a silent pass
	Level   int        `json:"level"`
	Version string     `json:"version,omitempty"`
	Tests   []DCGMTest `json:"tests,omitempty"`
	Note    string     `json:"note,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// DCGMTest is one test of a DCGM diagnostic, per GPU when DCGM reports it so.
type DCGMTest struct {
	Name   string `json:"name"`
	GPU    *int   `json:"gpu,omitempty"`
	Result string `json:"result"` // "pass", "fail", "warn", "skip" (lower case)
	Info   string `json:"info,omitempty"`
}

// Compare is one GPU-to-GPU comparison of a metric across the cards of a host.
type Compare struct {
	Metric         string        `json:"metric"` // e.g. "sgemm_fp32", "output_tok_s_peak", "ttft_p95_ms"
	HigherIsBetter bool          `json:"higher_is_better"`
	VariancePct    float64       `json:"variance_pct"`
	Best           float64       `json:"best"`
	Values         []CompareCell `json:"values"`
	// LowConfidence: a guard stopped the call (too few samples, tiny throughput, small TTFT spread).
	LowConfidence bool   `json:"low_confidence,omitempty"`
	Note          string `json:"note,omitempty"`
	// ClientLimited: the GPUs were loaded at once by one load generator that fell behind on some
	// rung of one of them, so none of this model's GPU-to-GPU cells is decided (Note says so).
	ClientLimited bool `json:"client_limited,omitempty"`
	// Against is what each figure was judged against: "peers_median" (the others' median, by the
	// interval rule: worse by more than VariancePct with the gap's interval beyond it) or "" (the best
	// figure, by value: microbenchmarks). DetectablePct is the smallest slowdown it could have flagged
	// on any of its GPUs (nodes) in 80 % of runs (0: a figure without interval, or low confidence).
	Against       string  `json:"against,omitempty"`
	DetectablePct float64 `json:"detectable_pct,omitempty"`
}

// CompareCell is one GPU's value in a comparison.
type CompareCell struct {
	GPU        int     `json:"gpu"`            // the GPU's index; -1 in node-to-node comparisons (the figure is the host's)
	Host       string  `json:"host,omitempty"` // node-to-node comparisons: the host this figure is from
	Value      float64 `json:"value"`
	DeltaPct   float64 `json:"delta_pct"` // vs best (vs Reference when set); positive = worse
	LowerBound bool    `json:"lower_bound,omitempty"`
	Flagged    bool    `json:"flagged"`
	// Inconclusive: the card looked worse, but its figure cannot show it (too few samples,
	// client-limited, a lower bound, overlapping intervals); Reason says which.
	Inconclusive bool   `json:"inconclusive,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Reference is the peers' median this figure was judged against (Against "peers_median": DeltaPct
	// is then against it, not the best), DeltaCI DeltaPct's confidence interval.
	Reference float64   `json:"reference,omitempty"`
	DeltaCI   *Interval `json:"delta_ci,omitempty"`
}
