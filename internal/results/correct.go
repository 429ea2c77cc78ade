package results

import "time"

// Correct, not only fast (issue 33): the GEMMs' answers checked, greedy outputs compared across
// GPUs, and the GPU's own telemetry during the load. Every type here is new; the fields that hold
// them are Microbench.Check, Burn.Check, Functional.Greedy and Endpoint.Telemetry.

// ResultCheck is the check of a GEMM's answers: each result compared with a reference (the first
// result's checksum, bit for bit), and a tile of the first result recomputed on the CPU.
type ResultCheck struct {
	Method string `json:"method"` // how the results were compared, in words
	// Checked is how many GEMM results were compared with the reference; Mismatches how many of
	// them differed from it (any mismatch fails the GPU).
	Checked    int64 `json:"checked"`
	Mismatches int64 `json:"mismatches"`
	// FirstMismatchS is when the first mismatch was seen, in seconds since the check started
	// (the burn's start); FirstMismatchAt the same on the wall clock.
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
