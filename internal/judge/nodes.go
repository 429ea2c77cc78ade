package judge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckNodeToNode is the check id of a node-to-node flag: under the "compare." prefix, but on
// hosts[].flags, which Apply keeps as they are; CompareNodes rewrites its own.
const CheckNodeToNode = "compare.node_to_node"

// CompareNodes compares the hosts of a merged fleet summary node to node, before Apply: per model and
// GPU-to-GPU metric, each host's figure is the median over its endpoints (per GPU, so GPU counts may
// differ), judged by the interval rule against the others' median with the LLM guards; microbenchmarks
// by the seed's rule against the best node with the GEMM guards. A flagged host gets a host flag;
// failed hosts and hosts without figures are left out. Running it again gives the same result.
func CompareNodes(s *results.Summary, llm, gemm compare.Guards) {
	if s.Fleet == nil {
		s.Fleet = &results.Fleet{}
	}
	s.Fleet.Comparisons = nil
	for i := range s.Hosts {
		s.Hosts[i].Flags = slices.DeleteFunc(s.Hosts[i].Flags, func(f results.Flag) bool { return f.Check == CheckNodeToNode })
	}
	var hosts []int
	for i, h := range s.Hosts {
		if h.Error == "" && h.Discovery.Error == "" {
			hosts = append(hosts, i)
		}
	}
	if len(hosts) < 2 {
		return
	}
	for _, model := range modelNames(s, hosts) {
		for _, met := range LLMMetrics {
			if met.BaselineOnly {
				continue
			}
			cell := func(h *results.Host) (compare.Figure, bool) { return llmCell(h, model, met) }
			addComparison(s, hosts, model+" "+met.Name, cell, met.HigherIsBetter, llm, compare.Peers)
		}
	}
	for _, name := range benchNames(s, hosts) {
		cell := func(h *results.Host) (compare.Figure, bool) { return benchCell(h, name) }
		addComparison(s, hosts, "health "+name, cell, true, gemm, compare.GPUs)
	}
}

// addComparison judges one metric across hosts (their figures read by cell) by rule and records it
// with its flags: cells are numbered by host position, and the rule's "gpu N" wording is rewritten
// to the host's name.
func addComparison(s *results.Summary, hosts []int, metric string, cell func(*results.Host) (compare.Figure, bool),
	higher bool, g compare.Guards, rule func(string, []compare.Cell, bool, compare.Guards) results.Compare) {
	var cells []compare.Cell
	for _, hi := range hosts {
		if f, ok := cell(&s.Hosts[hi]); ok {
			cells = append(cells, compare.Cell{GPU: hi, Figure: f})
		}
	}
	if len(cells) < 2 {
		return
	}
	// The rule's wording keys on the metric's name (throughput / TTFT guards), so judge the bare
	// metric and prefix the model afterwards.
	what, bare := metric[:max(0, strings.LastIndex(metric, " "))], metric[strings.LastIndex(metric, " ")+1:]
	cmp := rule(bare, cells, higher, g)
	cmp.Metric = metric
	rename := hostRenamer(s, cells)
	cmp.Note = rename.Replace(cmp.Note)
	for i := range cmp.Values {
		v := &cmp.Values[i]
		h := &s.Hosts[v.GPU]       // the rule numbered the cells by host position
		v.Host, v.GPU = h.Name, -1 // a host's figure (the median over its GPUs), not one GPU's
		v.Reason = rename.Replace(v.Reason)
		if v.Flagged {
			h.Flags = append(h.Flags, nodeFlag(h.Name, what, v.Reason))
		}
	}
	s.Fleet.Comparisons = append(s.Fleet.Comparisons, cmp)
}

// nodeFlag is the host flag of a node the comparison of what (a model, "health") flagged with
// reason, which does not name the node again: every reader prints its subject ("node NAME").
func nodeFlag(host, what, reason string) results.Flag {
	reason = strings.Replace(reason, " on node "+host+" ", " ", 1)
	reason = strings.Replace(reason, "check this card's", "check this node's", 1)
	return results.Flag{Scope: "host", Subject: "node " + host, Check: CheckNodeToNode, Reason: what + ": " + reason}
}

// hostRenamer rewrites judge's "gpu N" (N = host position) to "node NAME".
func hostRenamer(s *results.Summary, cells []compare.Cell) *strings.Replacer {
	var pairs []string
	for _, c := range cells {
		name := s.Hosts[c.GPU].Name
		pairs = append(pairs, fmt.Sprintf("on gpu %d ", c.GPU), "on node "+name+" ",
			fmt.Sprintf("(gpu %d:", c.GPU), "(node "+name+":", fmt.Sprintf("gpu %d has", c.GPU), "node "+name+" has")
	}
	pairs = append(pairs, "the median of the other GPUs", "the median of the other nodes", "weakest GPU's figure", "weakest node's figure")
	return strings.NewReplacer(pairs...)
}

// llmCell is a host's figure for one model and metric: the median over its endpoints with load whose
// figure can decide (neither client-limited nor a lower bound) when they are at least half, so one
// starved load among eight does not silence a node; otherwise over all.
func llmCell(h *results.Host, model string, met LLMMetric) (compare.Figure, bool) {
	var all, sure []compare.Figure
	for _, m := range h.Models {
		if m.Model != model {
			continue
		}
		for _, ep := range m.Endpoints {
			if ep.Load == nil || len(ep.Load.Runs) == 0 || ep.Error != "" || SharedGPU(&ep) || EngineFaulted(&ep) {
				continue
			}
			f, ok := met.Get(ep.Load)
			if !ok {
				continue
			}
			f = acrossRuns(ep.Load, met.Name, f) // each node's run is its own
			f.ReqS = ep.Load.SustainedReqS
			all = append(all, f)
			if !f.ClientLimited && !f.LowerBound {
				sure = append(sure, f)
			}
		}
	}
	if len(all) == 0 {
		return compare.Figure{}, false
	}
	use := all
	if 2*len(sure) >= len(all) {
		use = sure
	}
	return compare.MedianOf(use), true
}

// benchCell is a host's figure for one health microbenchmark: the median over its GPUs.
func benchCell(h *results.Host, name string) (compare.Figure, bool) {
	if h.Health == nil {
		return compare.Figure{}, false
	}
	var vals []float64
	for _, g := range h.Health.GPUs {
		for _, b := range g.Bench {
			if b.Name == name && b.Error == "" && b.Value > 0 && !b.Busy { // a shared GPU's figure says nothing of its node
				vals = append(vals, b.Value)
			}
		}
	}
	return compare.Figure{Value: compare.Median(vals)}, len(vals) > 0
}

func modelNames(s *results.Summary, hosts []int) []string {
	var out []string
	for _, hi := range hosts {
		for _, m := range s.Hosts[hi].Models {
			if !slices.Contains(out, m.Model) {
				out = append(out, m.Model)
			}
		}
	}
	return out
}

func benchNames(s *results.Summary, hosts []int) []string {
	var out []string
	for _, hi := range hosts {
		if h := s.Hosts[hi].Health; h != nil {
			for _, g := range h.GPUs {
				for _, b := range g.Bench {
					if !slices.Contains(out, b.Name) {
						out = append(out, b.Name)
					}
				}
			}
		}
	}
	return out
}
