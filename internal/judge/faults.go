package judge

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Check ids of the verdicts that name a layer other than the GPU's: its failed requests leave the
// serving verdict inconclusive, never failed (docs/detection.md, "Every failure names its layer").
const (
	CheckEngineFault  = "judge.engine_fault"
	CheckNetworkFault = "judge.network_fault"
	CheckClientFault  = "judge.client_fault"
)

// gpuErrorRe matches words (an engine's log, a failed request's detail, a health error) that name a
// fault of the GPU itself: an XID, ECC errors, the GPU gone from the bus.
var gpuErrorRe = regexp.MustCompile(`(?i)\bxid\b|uncorrectable ecc|ecc error|cudaErrorECC|CUDA_ERROR_ECC_UNCORRECTABLE\b|fallen off the bus|NVML_ERROR_GPU_IS_LOST|GPU is lost`)

// deviceFaultRe matches the faults a kernel raises on the device (CUDA's illegal address, launch
// failure, misaligned address, illegal instruction; cuBLAS's execution failure): a bad GPU raises
// them, and so does an engine's own bad kernel, as readily (the XIDs behind them, 13, 31 and 43, are
// appXIDs). In gpuvet's own benchmarks, known-good kernels, they are the GPU's; in an engine's
// words they leave the GPU not proven (deviceFaultWords).
var deviceFaultRe = regexp.MustCompile(`(?i)illegal memory access|misaligned address|illegal instruction|unspecified launch failure|CUBLAS_STATUS_EXECUTION_FAILED|CUDA_ERROR_(?:ILLEGAL_ADDRESS|LAUNCH_FAILED|MISALIGNED_ADDRESS|ILLEGAL_INSTRUCTION)\b`)

// tracebackRe matches a Python traceback in an engine's words (a server error's body, its log).
var tracebackRe = regexp.MustCompile(`Traceback \(most recent call last\)`)

// xidNumRe finds an XID's number in words ("NVRM: Xid (PCI:0000:18:00): 79, …", "XID 31").
var xidNumRe = regexp.MustCompile(`(?i)\bxid\b(?: \([^)]*\))?:? *(\d+)`)

// gpuError reports whether s names a fault of the GPU itself: not an out-of-memory (the engine's
// settings) nor a device-side assert (a kernel's own check of its inputs: the software's), nor an
// application's XID (appXIDs: a device fault).
func gpuError(s string) bool {
	return softwareless(s) && gpuErrorRe.MatchString(withoutAppXIDs(s))
}

// deviceFault reports whether s names a fault a kernel raised on the device (deviceFaultRe, or an
// application's XID).
func deviceFault(s string) bool {
	return softwareless(s) && (deviceFaultRe.MatchString(s) || withoutAppXIDs(s) != s)
}

// withoutAppXIDs is s without its mentions of an application's XID.
func withoutAppXIDs(s string) string {
	return xidNumRe.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.ParseUint(xidNumRe.FindStringSubmatch(m)[1], 10, 64)
		if err == nil && xidLayer(n) == results.LayerEngine {
			return ""
		}
		return m
	})
}

// softwareless reports whether s names neither an out-of-memory nor a device-side assert, the
// software's own faults whatever else the message says.
func softwareless(s string) bool {
	low := strings.ToLower(s)
	return !strings.Contains(low, "out of memory") && !strings.Contains(low, "device-side assert")
}

// deviceFaultWords is what to do about a device fault in an engine's words.
const deviceFaultWords = "a device fault that an engine's own kernel raises as readily as the GPU (CUDA's illegal address or launch failure): the GPU is not proven; rerun with a fresh engine, and if it comes back on this GPU and not its siblings, reset the GPU"

// Faults names the layer of every failed request of ep's load, with the evidence: with evidence about
// the GPU (gpuEvidence) every one is the GPU's, else each error class has its layer (LayerOf). Nil
// when no request failed.
func Faults(ep *results.Endpoint) []results.Fault {
	l := ep.Load
	if l == nil {
		return nil
	}
	byLayer := map[string]*results.Fault{}
	gpuWhy := gpuEvidence(ep)
	exactSent := !slices.Contains(l.DroppedParams, "min_tokens+ignore_eos")
	for ri, r := range l.Runs {
		// Sorted, a stable account: the same summary judged twice reads the same.
		for _, class := range slices.Sorted(maps.Keys(r.Errors)) {
			n := r.Errors[class]
			if n == 0 {
				continue
			}
			layer := LayerOf(class, gpuWhy != nil, ep.EngineExit != "", r.ClientLimited, loopback(ep.URL))
			f := byLayer[layer]
			if f == nil {
				f = &results.Fault{Layer: layer, Kinds: map[string]int{}}
				byLayer[layer] = f
			}
			f.Requests += n
			f.Kinds[class] += n
			for _, e := range r.ErrorSamples {
				if e.Class == class && len(f.Evidence) < 2*results.MaxErrorSamples {
					f.Evidence = append(f.Evidence, fmt.Sprintf("rung %d (%s) %s", ri+1, rungLabel(r), e))
				}
			}
		}
	}
	var out []results.Fault
	for _, layer := range []string{results.LayerGPU, results.LayerEngine, results.LayerNetwork, results.LayerClient} {
		f := byLayer[layer]
		if f == nil {
			continue
		}
		// "rung N …" lines by rung number, then as they were.
		slices.SortStableFunc(f.Evidence, func(a, b string) int { return cmp.Compare(rungNum(a), rungNum(b)) })
		switch layer {
		case results.LayerGPU:
			f.Evidence = append(gpuWhy, f.Evidence...)
			f.Reason = fmt.Sprintf("%d failed request(s) (%s) with evidence about the GPU: %s", f.Requests, ErrorKinds(f.Kinds), gpuWhy[0])
		case results.LayerEngine:
			f.Evidence = append(engineWords(ep), f.Evidence...)
			f.Reason = "the engine misbehaved: " + engineWhat(f.Kinds, exactSent, ep.EngineExit, slices.ContainsFunc(f.Evidence, deviceFault) || deviceFault(ep.LogTail))
		case results.LayerNetwork:
			f.Reason = fmt.Sprintf("the connection to the engine failed while it ran (%s): the network or a proxy, not the GPU", ErrorKinds(f.Kinds))
		case results.LayerClient:
			f.Reason = fmt.Sprintf("the load generator fell behind and its own deadline ended %d request(s) (%s): the client's, not the GPU's", f.Requests, ErrorKinds(f.Kinds))
		}
		out = append(out, *f)
	}
	return out
}

// LayerOf is the layer of one error class: the GPU's on evidence about the GPU, else the engine's for
// its protocol faults and anything after it exited, the network's for a redirect or a refused
// connection off this host's loopback (where only the engine can refuse it), the client's for a
// timeout of a rung it could not keep up with.
func LayerOf(class string, gpu, exited, clientLimited, loopback bool) string {
	switch {
	case gpu:
		return results.LayerGPU
	case exited:
		return results.LayerEngine
	case class == "connect" && !loopback || class == "redirect":
		return results.LayerNetwork
	case class == "timeout" && clientLimited:
		return results.LayerClient
	}
	return results.LayerEngine
}

// loopback reports whether an endpoint's URL is on this host's loopback (an engine gpuvet started).
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()
}

// gpuEvidence lists what says the GPU itself failed during the load: XIDs (but appXIDs) and
// uncorrected ECC errors in its telemetry, a GPU error in the engine's log or a failed request's words.
func gpuEvidence(ep *results.Endpoint) []string {
	var out []string
	if t := ep.Telemetry; t != nil {
		for _, g := range t.GPUs {
			for _, x := range g.XIDs {
				if xidLayer(x.XID) != results.LayerEngine { // an engine's fault raises these as readily: not the GPU's alone
					out = append(out, fmt.Sprintf("gpu %d: XID %d during the load%s", g.GPU, x.XID, paren(x.Note)))
				}
			}
			if g.ECCUncorrected != nil && *g.ECCUncorrected > 0 {
				out = append(out, fmt.Sprintf("gpu %d: %d uncorrected ECC error(s) during the load", g.GPU, *g.ECCUncorrected))
			}
		}
	}
	for _, line := range strings.Split(ep.LogTail, "\n") {
		if gpuError(line) {
			out = append(out, "engine log: "+strings.TrimSpace(clipText(line, 300)))
			break
		}
	}
	if ep.Load != nil {
		for ri, r := range ep.Load.Runs {
			for _, e := range r.ErrorSamples {
				if gpuError(e.Detail) {
					return append(out, fmt.Sprintf("rung %d (%s) %s", ri+1, rungLabel(r), e))
				}
			}
		}
	}
	return out
}

// engineWords is the engine's own account of its fault: how it exited, its first traceback line.
func engineWords(ep *results.Endpoint) []string {
	var out []string
	if ep.EngineExit != "" {
		out = append(out, "the engine process exited during the load: "+ep.EngineExit)
	}
	if i := tracebackRe.FindStringIndex(ep.LogTail); i != nil {
		tb := strings.Split(strings.TrimSpace(ep.LogTail[i[0]:]), "\n")
		last := tb[len(tb)-1] // the exception
		for j := len(tb) - 1; j > 0 && strings.HasPrefix(tb[j], " "); j-- {
			last = tb[j-1]
		}
		out = append(out, "engine log: Python traceback ending in "+strings.TrimSpace(clipText(last, 300)))
	}
	return out
}

// engineWhat says what the engine did wrong, error class by class, most frequent first.
func engineWhat(kinds map[string]int, exactSent bool, exit string, device bool) string {
	var parts []string
	for _, kv := range strings.Split(ErrorKinds(kinds), ", ") {
		class, n, _ := strings.Cut(kv, " ")
		what := class
		switch {
		case class == "short_output" && exactSent:
			what = "short output despite ignore_eos"
		case class == "short_output":
			what = "short output (the endpoint refused ignore_eos, so an EOS ends a request early)"
		case class == "cut_stream":
			what = "stream cut without a finish reason"
		case class == "stream_error":
			what = "error inside the stream"
		case class == "over_max_tokens":
			what = "more tokens than max_tokens"
		case strings.HasPrefix(class, "http_5"):
			what = "HTTP " + strings.TrimPrefix(class, "http_") + " server error"
		case class == "connect" && exit != "":
			what = "connection refused after the engine exited"
		}
		parts = append(parts, fmt.Sprintf("%s (%s request(s))", what, n))
	}
	s := strings.Join(parts, ", ")
	if exit != "" {
		s += "; the process exited (" + exit + ")"
	}
	if device {
		return s + ": " + deviceFaultWords
	}
	return s + ": a fault of the engine or its server, not evidence about the GPU; read the engine log and the requests named, fix or change the engine, and rerun"
}

// EngineFaulted reports whether the engine failed a request of ep's load: its figures then enter no
// comparison (GPU, node, baseline) and decide no gate.
func EngineFaulted(ep *results.Endpoint) bool {
	return slices.ContainsFunc(Faults(ep), func(f results.Fault) bool { return f.Layer == results.LayerEngine })
}

// engineFaultUndecides makes the gates of an endpoint whose engine misbehaved inconclusive: they say
// nothing of the GPU. The error-rate gate (the GPU's own failures) and the layer verdicts stay.
func engineFaultUndecides(ep *results.Endpoint) {
	if !EngineFaulted(ep) {
		return
	}
	for i := range ep.Verdicts {
		v := &ep.Verdicts[i]
		if v.Check == CheckErrorRate || strings.HasPrefix(v.Check, "judge.") || (v.Result != ResultPass && v.Result != ResultFail) {
			continue
		}
		was := v.Result
		v.Result = ResultInconclusive
		v.Reason = fmt.Sprintf("the engine misbehaved (%s): a %s on its figures says nothing of this GPU; %s", CheckEngineFault, was, v.Reason)
	}
}

// faultVerdicts are the verdicts of the layers other than the GPU's on their failed requests. Above
// lim (a share of all the load's requests) one fails the endpoint and the run, not the GPU; at or
// below it stays inconclusive and faultFlags flags the layer. The client's are always inconclusive.
func faultVerdicts(faults []results.Fault, total int, lim Limit) []results.Verdict {
	var out []results.Verdict
	for _, f := range faults {
		lc, ok := layerChecks[f.Layer]
		if !ok {
			continue
		}
		reason := f.Reason
		if len(f.Evidence) > 0 {
			reason += "; evidence: " + strings.Join(f.Evidence[:min(3, len(f.Evidence))], "; ")
		}
		v := results.Verdict{Check: lc.check, Rule: lc.rule, Source: "gpuvet's layer rule (docs/detection.md)", Result: ResultInconclusive, Reason: reason}
		if share, over := faultShare(f, total, lim); over && f.Layer != results.LayerClient {
			v.Result = ResultFail
			v.Value, v.Threshold, v.Unit, v.Source = &share, lim.Value, "%", lim.Source
			v.Reason = fmt.Sprintf("%d of %d requests (%s %%) failed, above %s %% (%s): %s", f.Requests, total, fmtNum(share), fmtNum(*lim.Value), lim.Source, reason)
		}
		out = append(out, v)
	}
	return out
}

// layerChecks are the check id and rule of each layer's verdict on its failed requests.
var layerChecks = map[string]struct{ check, rule string }{
	results.LayerEngine:  {CheckEngineFault, "the engine serves every request as asked"},
	results.LayerNetwork: {CheckNetworkFault, "the network carries every request"},
	results.LayerClient:  {CheckClientFault, "the load generator keeps its schedule"},
}

// faultShare is a layer's failed requests as a share of every request of the load, and whether it
// is above lim (a disabled limit: any failed request is).
func faultShare(f results.Fault, total int, lim Limit) (share float64, over bool) {
	if total <= 0 {
		return 0, f.Requests > 0
	}
	share = 100 * float64(f.Requests) / float64(total)
	if lim.Value == nil {
		return share, f.Requests > 0
	}
	return share, share > *lim.Value
}

// faultFlags flag the engine's and the network's failed requests at or under the limit: errors are
// never a silent pass.
func faultFlags(subject string, faults []results.Fault, vs []results.Verdict) []results.Flag {
	var out []results.Flag
	for _, f := range faults {
		check := layerChecks[f.Layer].check
		if f.Layer != results.LayerClient && check != "" && !slices.ContainsFunc(vs, func(v results.Verdict) bool { return v.Check == check && v.Result == ResultFail }) {
			out = append(out, results.Flag{Scope: "model", Subject: subject, Check: check, Reason: f.Reason})
		}
	}
	return out
}

// gpuErrorCounts are the load's successful requests and the failures the GPU caused: what the
// error-rate gate judges.
func gpuErrorCounts(ep *results.Endpoint, faults []results.Fault) (successful, errored int, byKind map[string]int) {
	successful, _, _ = ErrorCounts(ep.Load)
	for _, f := range faults {
		if f.Layer == results.LayerGPU {
			return successful, f.Requests, f.Kinds
		}
	}
	return successful, 0, map[string]int{}
}

// notGPUErrors counts the failed requests of the layers other than the GPU's.
func notGPUErrors(faults []results.Fault) int {
	n := 0
	for _, f := range faults {
		if f.Layer != results.LayerGPU {
			n += f.Requests
		}
	}
	return n
}

func rungLabel(r results.Run) string {
	if r.TargetRate > 0 {
		return fmt.Sprintf("%s %.3g req/s", r.Kind, r.TargetRate)
	}
	return fmt.Sprintf("%s c=%d", r.Kind, r.Concurrency)
}

func rungNum(s string) int {
	var n int
	fmt.Sscanf(s, "rung %d", &n)
	return n
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
