package results

import "fmt"

// Layers a failed request is attributed to (Fault.Layer), and the layers of findings
// (layers.go). `failed` for a GPU needs evidence about the GPU; what the engine, the network or the
// client did leaves the GPU inconclusive.
const (
	LayerGPU     = "gpu"     // an XID or ECC errors during the load, or the engine failing with a GPU error in its words
	LayerEngine  = "engine"  // a protocol fault: short output despite ignore_eos, a stream cut without a finish reason, a 5xx, an exit
	LayerNetwork = "network" // the connection failed while the engine was running, or a proxy answered
	LayerClient  = "client"  // the load generator fell behind (its rung client-limited) and its own deadline ended the request
)

// MaxErrorSamples is how many failed requests of each class a rung keeps as evidence.
const MaxErrorSamples = 3

// ErrorSample is one failed request, as the load generator saw it.
type ErrorSample struct {
	Class  string  `json:"class"`            // the error class (Run.Errors' key)
	Detail string  `json:"detail,omitempty"` // its words (the server's, or the client's account)
	Index  int     `json:"index"`            // the prompt's index (records.jsonl has the request)
	EndS   float64 `json:"end_s"`            // when it ended, seconds since Load.StartedAt
	// OutputTokens and RequestedTokens: what came back against what was asked.
	OutputTokens    int `json:"output_tokens"`
	RequestedTokens int `json:"requested_tokens,omitempty"`
}

// String is the sample as evidence: "request #17 at 81.2 s: short_output (asked for 256 output tokens, got 11)".
func (e ErrorSample) String() string {
	s := fmt.Sprintf("request #%d at %.1f s: %s", e.Index, e.EndS, e.Class)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Fault is the failed requests of one endpoint that one layer caused, with the evidence.
type Fault struct {
	Layer    string         `json:"layer"`
	Requests int            `json:"requests"`        // failed requests attributed to the layer
	Kinds    map[string]int `json:"kinds,omitempty"` // by error class
	Reason   string         `json:"reason"`
	// Evidence: the first failed requests (rung and request), engine log lines, telemetry events.
	Evidence []string `json:"evidence,omitempty"`
}
