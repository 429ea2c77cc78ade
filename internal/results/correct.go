package results

import (
	"fmt"
	"time"
)

// ResultCheck is the check of a GEMM's answers: each result compared with a reference (the first
// result's checksum, bit for bit), and a tile of the first result recomputed on the CPU.
type ResultCheck struct {
	Method string `json:"method"` // how the results were compared, in words
	// Checked is how many GEMM results were compared with the reference; Mismatches how many of
	// them differed from it (any mismatch fails the GPU).
	Checked    int64 `json:"checked"`
	Mismatches int64 `json:"mismatches"`
	// FirstMismatchS is when the first mismatch was seen, in seconds since the check (the burn)
	// started; FirstMismatchAt the same on the wall clock.
	FirstMismatchS  *float64   `json:"first_mismatch_s,omitempty"`
	FirstMismatchAt *time.Time `json:"first_mismatch_at,omitzero"`
	// MismatchDetail describes the first mismatch (which result, which row, the two values).
	MismatchDetail string `json:"mismatch_detail,omitempty"`
	// Tile is the CPU recomputation of a tile of the reference result: how many elements, the
	// largest error against its tolerance; TileMismatches counts elements beyond it (the
	// reference itself was wrong).
	Tile           string `json:"tile,omitempty"`
	TileMismatches int    `json:"tile_mismatches,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Failed reports whether the check found a wrong answer.
func (c *ResultCheck) Failed() bool { return c != nil && (c.Mismatches > 0 || c.TileMismatches > 0) }

// GreedyOutputs is the functional suite's greedy case on one endpoint (functional/greedy.go): GPUs
// of one model, engine and version must give the same outputs, and a GPU the same on its repeat.
type GreedyOutputs struct {
	// Basis is what was compared: "token_ids" (the engine's own ids, return_token_ids) or "text";
	// BasisNote says why text.
	Basis     string `json:"basis"`
	BasisNote string `json:"basis_note,omitempty"`
	MaxTokens int    `json:"max_tokens"`
	// Outputs are the first compared pass, one per prompt in order.
	Outputs []GreedyOutput `json:"outputs"`
	// RepeatDiff is where the second pass first differed from the first (nil: it agreed).
	RepeatDiff *OutputDiff `json:"repeat_diff,omitempty"`
}

// GreedyOutput is one prompt's greedy answer.
type GreedyOutput struct {
	Prompt   string `json:"prompt"`
	TokenIDs []int  `json:"token_ids,omitempty"`
	Text     string `json:"text"`
	Finish   string `json:"finish_reason,omitempty"`
}

// OutputDiff is the first place two sets of greedy outputs differ: prompt (from 0), position (a
// token or a character from 0, by Unit) and what each side had there ("end" past its last).
type OutputDiff struct {
	Prompt   int    `json:"prompt"`
	Position int    `json:"position"`
	Unit     string `json:"unit"` // "token" or "character"
	Got      string `json:"got"`
	Want     string `json:"want"`
}

// FirstDiff is where o first differs from ref (nil: the same outputs). Two sets on different bases
// are compared by text.
func (o *GreedyOutputs) FirstDiff(ref *GreedyOutputs) *OutputDiff {
	ids := o.Basis == "token_ids" && ref.Basis == "token_ids"
	for p := 0; p < max(len(o.Outputs), len(ref.Outputs)); p++ {
		if p >= len(o.Outputs) || p >= len(ref.Outputs) {
			return &OutputDiff{Prompt: p, Unit: "prompt", Got: presence(p < len(o.Outputs)), Want: presence(p < len(ref.Outputs))}
		}
		var d *OutputDiff
		if ids {
			d = diffSeq(o.Outputs[p].TokenIDs, ref.Outputs[p].TokenIDs, "token", func(v int) string { return fmt.Sprint(v) })
		} else {
			d = diffSeq([]rune(o.Outputs[p].Text), []rune(ref.Outputs[p].Text), "character", func(r rune) string { return fmt.Sprintf("%q", r) })
		}
		if d != nil {
			d.Prompt = p
			return d
		}
	}
	return nil
}

func presence(ok bool) string {
	if ok {
		return "answered"
	}
	return "missing"
}

func diffSeq[T comparable](got, want []T, unit string, show func(T) string) *OutputDiff {
	at := func(s []T, i int) string {
		if i < len(s) {
			return show(s[i])
		}
		return "end"
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return &OutputDiff{Position: i, Unit: unit, Got: at(got, i), Want: at(want, i)}
		}
	}
	return nil
}

// String says where: "prompt 2, token 5: 1234 instead of 5678".
func (d *OutputDiff) String() string {
	return fmt.Sprintf("prompt %d, %s %d: %s instead of %s", d.Prompt, d.Unit, d.Position, d.Got, d.Want)
}

// Telemetry is the GPUs' own telemetry during one endpoint's load: per GPU, a bounded time series
// (T in seconds since Load.StartedAt), each rung's share of it, and the error counters that grew.
type Telemetry struct {
	Source          string         `json:"source"` // "nvml", "sim"
	IntervalSeconds float64        `json:"interval_seconds"`
	GPUs            []GPUTelemetry `json:"gpus"`
	Note            string         `json:"note,omitempty"`
}

// GPUTelemetry is one GPU's telemetry during a load.
type GPUTelemetry struct {
	GPU     int           `json:"gpu"`
	Samples []PowerSample `json:"samples,omitempty"` // at most TelemetryMaxSamples: one in Stride kept
	Stride  int           `json:"stride,omitempty"`
	// Rungs summarise the samples inside each rung's measured window (Load.Runs order).
	Rungs []RungTelemetry `json:"rungs,omitempty"`
	// What grew during the load: XID events, ECC error counts (volatile), PCIe replays. Nil: not read.
	XIDs           []XIDEvent `json:"xids,omitempty"`
	ECCCorrected   *int64     `json:"ecc_corrected_delta,omitempty"`
	ECCUncorrected *int64     `json:"ecc_uncorrected_delta,omitempty"`
	PCIeReplays    *int64     `json:"pcie_replay_delta,omitempty"`
	CountersNote   string     `json:"counters_note,omitempty"`
}

// TelemetryMaxSamples bounds a GPU's series in the summary.
const TelemetryMaxSamples = 600

// RungTelemetry is one rung's telemetry on one GPU.
type RungTelemetry struct {
	Rung            int     `json:"rung"` // index in Load.Runs
	Label           string  `json:"label"`
	StartS          float64 `json:"start_s"`
	EndS            float64 `json:"end_s"`
	Samples         int     `json:"samples"`
	SMClockMeanMHz  int     `json:"sm_clock_mean_mhz"`
	SMClockMinMHz   int     `json:"sm_clock_min_mhz"`
	MemClockMeanMHz int     `json:"mem_clock_mean_mhz,omitempty"`
	PowerMeanW      float64 `json:"power_mean_w"`
	PowerMaxW       float64 `json:"power_max_w"`
	TempMaxC        int     `json:"temp_max_c"`
	UtilMeanPct     int     `json:"util_mean_pct"`
	MemUsedMaxMiB   int64   `json:"mem_used_max_mib,omitempty"`
	// ReasonShare is the share of the rung's samples in which each clock-event reason was active.
	ReasonShare map[string]float64 `json:"reason_share,omitempty"`
}
