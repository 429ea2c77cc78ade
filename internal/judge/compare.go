// Package judge turns measured figures into verdicts: absolute gates, reference-table overrides,
// GPU-to-GPU comparisons, baseline overhead, and the ok/flag/failed roll-up. Every rule is a small
// pure function over plain data, so each can be tested by a table and each verdict can say which
// rule, which threshold and which source decided it. Whether a figure can decide at all (samples,
// client-limited, lower bound, confidence interval) is the one rule of package compare.
package judge

import (
	"github.com/gpuvet/gpuvet/internal/compare"
)

// LLM metric names used in comparisons and baselines. Their names carry their class: a name ending
// in "_req_s" or containing "tok_s" is a throughput; a name starting with "ttft" is a TTFT.
const (
	MetricSustainedReqS  = "sustained_req_s"
	MetricPeakOutputTokS = "output_tok_s_peak"
	MetricTTFTP95        = "ttft_p95_ms"
	MetricTTFTP99        = "ttft_p99_ms"
	MetricITLP95         = "itl_p95_ms"
	MetricTPOTP95        = "tpot_p95_ms"
	MetricTPOTP50        = "tpot_p50_ms"
	// The aicr-style fixed-concurrency run's figures (present when the profile has one). Its TTFT
	// p99 is a tail figure of one short window: compared against baselines (with the TTFT ms floor,
	// hence the "ttft" prefix), never GPU to GPU, where one scheduler hiccup would flag a card.
	MetricConcOutputTokS = "concurrency_output_tok_s"
	MetricConcTTFTP99    = "ttft_p99_concurrency_ms"
)

// Guards are the tolerance and noise guards of package compare.
type Guards = compare.Guards

func fmtNum(v float64) string { return compare.Num(v) }
