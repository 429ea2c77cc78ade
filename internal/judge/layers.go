package judge

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// checkKind is one row of the layer table: the layer of a check's finding and the action it asks for,
// unless its maker knew better (a driver's recovery action, gateLayers).
type checkKind struct {
	layer, action string
}

// checkClientLimited is the finding of comparisons the load generator left undecided;
// checkUndecided of comparisons too few requests (or the engine's drift) left undecided.
const (
	checkClientLimited = "load.client_limited"
	checkUndecided     = "compare.undecided"
)

// checkKinds maps a check id, or a prefix ending in ".", to its layer and action (docs/detection.md,
// "Findings by layer", prints it).
var checkKinds = byKind(map[checkKind][]string{
	{results.LayerGPU, results.ActionResetGPU}: {CheckECC, CheckRetired, CheckRemap, CheckXID, CheckDCGM, CheckFloor, CheckGPUToGPU,
		CheckContextCompare, CheckPreemption, CheckDrift, CheckErrorRate, CheckLoadErrors, CheckExpected, CheckXIDLoad, CheckECCLoad, "health."},
	{results.LayerGPU, results.ActionDrainRMA}:   {CheckClockEvents, CheckBurnClock, CheckResults, CheckOutputsDiffer, CheckThrottled, CheckLoadClockEvents},
	{results.LayerGPU, results.ActionRebootNode}: {CheckHealthCount, CheckNodeToNode, "run.gpu_count"},
	{results.LayerGPU, results.ActionRerun}:      {checkGatePrefix},
	{results.LayerInterconnect, results.ActionRebootNode}: {CheckPCIeWidth, CheckPCIeBW, CheckNVLinkDown, CheckNVLinkPath, CheckAllReduce, CheckDCGMLink,
		CheckLinkCompare, CheckReplayLoad},
	{results.LayerInterconnect, results.ActionResetGPU}: {CheckNVLinkErrors, CheckNVLinkXIDLoad},
	{results.LayerHost, results.ActionRerun}:            {CheckHealthBusy, CheckBusy, CheckDCGMSoftware},
	{results.LayerHost, results.ActionDrainRMA}:         {CheckPowerBrake, CheckLoadPowerBrake},
	{results.LayerEngine, results.ActionFixEngine}:      {CheckEngineFault, CheckPrefixCache, checkFunctPrefix},
	{results.LayerEngine, results.ActionNone}:           {"engine.version"},
	{results.LayerEngine, results.ActionRerun}:          {CheckAppXIDLoad},
	{results.LayerInfra, results.ActionRerun}:           {CheckNetworkFault, CheckLoadPartial},
	{results.LayerInfra, results.ActionNone}:            {CheckBaseline},
	{results.LayerClient, results.ActionRerun}:          {CheckClientFault, checkClientLimited, checkUndecided},
})

// byKind turns the checks of each kind into each check's kind.
func byKind(kinds map[checkKind][]string) map[string]checkKind {
	out := map[string]checkKind{}
	for k, checks := range kinds {
		for _, c := range checks {
			out[c] = k
		}
	}
	return out
}

// kindOf is a check's row: its own, else its longest prefix's; else the host's, to rerun (never the
// GPU's without evidence).
func kindOf(check string) checkKind {
	if k, ok := checkKinds[check]; ok {
		return k
	}
	best := ""
	for p := range checkKinds {
		if strings.HasSuffix(p, ".") && strings.HasPrefix(check, p) && len(p) > len(best) {
			best = p
		}
	}
	if best != "" {
		return checkKinds[best]
	}
	return checkKind{results.LayerHost, results.ActionRerun}
}

// classify gives a flag its layer and action from the table when its maker gave none.
func classify(f *results.Flag) {
	k := kindOf(f.Check)
	f.Layer, f.Action = cmp.Or(f.Layer, k.layer), cmp.Or(f.Action, k.action)
}

func classifyAll(fl []results.Flag) {
	for i := range fl {
		classify(&fl[i])
	}
}

// classifyHost gives every flag of a host its layer and action.
func classifyHost(h *results.Host) {
	classifyAll(h.Flags)
	if hh := h.Health; hh != nil {
		classifyAll(hh.Flags)
		for gi := range hh.GPUs {
			classifyAll(hh.GPUs[gi].Flags)
		}
	}
	for mi := range h.Models {
		m := &h.Models[mi]
		classifyAll(m.Flags)
		for ei := range m.Endpoints {
			classifyAll(m.Endpoints[ei].Flags)
		}
	}
}

// errorLayer is the layer of a gpuvet phase's error (its health benchmarks, discovery): its maker's
// when it said, else the GPU's when the words name a GPU fault or a device fault (gpuvet's kernels
// are known good), else dflt.
func errorLayer(given, text, dflt string) string {
	switch {
	case given != "":
		return given
	case gpuError(text) || deviceFault(text):
		return results.LayerGPU
	}
	return dflt
}

// actionFor is the action an error of a layer asks for.
func actionFor(layer string) string {
	switch layer {
	case results.LayerGPU:
		return results.ActionResetGPU
	case results.LayerInterconnect:
		return results.ActionRebootNode
	case results.LayerEngine:
		return results.ActionFixEngine
	}
	return results.ActionRerun
}

// failingFlag reports whether a flag's finding fails what it is about, not only flags it.
func failingFlag(f results.Flag) bool {
	return f.Fails || failingChecks[f.Check] // failingChecks: a summary written before Fails
}

// flagStatus is a flag's finding's status: failed when it fails what it is about, else flag.
func flagStatus(f results.Flag) results.Status {
	if failingFlag(f) {
		return results.StatusFailed
	}
	return results.StatusFlag
}

// flagFinding is the finding of a flag on host (and gpus), with status st.
func flagFinding(host string, gpus []int, st results.Status, f results.Flag) results.Finding {
	return results.Finding{Layer: f.Layer, Status: st, Host: host, GPUs: gpus, Subject: f.Subject, Check: f.Check, Reason: f.Reason, Action: f.Action}
}

// endpointFindings are an endpoint's findings: its flags, its errors, what left it undecided.
func endpointFindings(host, model string, ep *results.Endpoint) []results.Finding {
	subj := subject(model, ep)
	var out []results.Finding
	add := func(layer string, st results.Status, check, reason, action string) {
		out = append(out, results.Finding{Layer: layer, Status: st, Host: host, GPUs: slices.Clone(ep.GPUs), Subject: subj, Check: check, Reason: reason, Action: action})
	}
	for _, f := range ep.Flags {
		add(f.Layer, flagStatus(f), f.Check, f.Reason, f.Action)
	}
	switch {
	case ep.Status == results.StatusInterrupted:
		// Stopped by the operator or a signal: no layer broke, and nothing it left undecided
		// says anything of one; the run's interruption is said once, by the run.
		return out
	case ep.Disruption != "":
		add(results.LayerInfra, results.StatusInconclusive, "judge.disruption", ep.Disruption+": not the hardware's: run again", results.ActionRerun)
	default:
		if l, check, what, action := endpointBroke(ep); l != "" {
			add(l, results.StatusFailed, check, what, action)
		}
	}
	if ep.Functional != nil && ep.Functional.Error != "" {
		add(results.LayerEngine, results.StatusFailed, "functional.error", "the API suite could not run: "+ep.Functional.Error, results.ActionFixEngine)
	}
	for _, v := range ep.Verdicts {
		if v.Result != ResultInconclusive || strings.HasPrefix(v.Check, checkJudgePrefix) && v.Check != CheckClientFault && v.Check != CheckOutputsDiffer {
			continue
		}
		if strings.Contains(v.Reason, CheckEngineFault) || SharedGPU(ep) {
			continue // the engine's or the host's finding says why
		}
		layer, action := undecidedLayer(v.Reason), results.ActionRerun
		switch {
		case v.Check == CheckExpected && v.Source == results.SourceNone:
			// No yardstick for this GPU × model × engine: a calibration decides it, not a rerun.
			layer, action = results.LayerEngine, results.ActionCalibrate
		case v.Check == CheckOutputsDiffer: // a lone GPU's repeat: the GPU's or the engine's, a run beside another decides
			layer = results.LayerGPU
		}
		add(layer, results.StatusInconclusive, v.Check, v.Rule+": "+v.Reason, action)
	}
	return out
}

// undecidedLayer is whose a figure left undecided (why) is: the engine's where its speed drifted,
// the host's where its CPUs starved the engine, else the client's (too few requests, fell behind).
func undecidedLayer(why string) string {
	switch {
	case strings.Contains(why, compare.EngineDrifted):
		return results.LayerEngine
	case strings.Contains(why, compare.CPUWaitFix):
		return results.LayerHost
	}
	return results.LayerClient
}

// endpointBroke is an endpoint's own breakage (the engine did not serve, or its load measured
// nothing), its layer, check, what to do, and the action (engineBreak reads the engine's words).
func endpointBroke(ep *results.Endpoint) (layer, check, what, action string) {
	var text string
	switch {
	case ep.Error != "":
		check, what, text = "engine.serve", "the engine did not serve: "+ep.Error, ep.Error+"\n"+ep.LogTail
	case ep.Load != nil && ep.Load.Error != "" && len(ep.Load.Runs) == 0:
		check, what, text = "load.error", "the load measured nothing: "+ep.Load.Error, ep.Load.Error
	default:
		return "", "", "", ""
	}
	layer, action, advice := engineBreak(ep.ErrorLayer, text)
	if advice != "" {
		what += "; " + advice
	}
	return layer, check, what, action
}

// Words of an engine that could not get its model from the hub (huggingface_hub's and transformers'
// errors, as vLLM, SGLang and transformers print them) and of a full disk.
var (
	hubUnreachableRe = regexp.MustCompile(`(?i)couldn't connect to '?https?://|LocalEntryNotFoundError|cannot find the requested files in the (?:local|disk) cache|HTTPSConnectionPool\(host='[^']*(?:huggingface|hf\.co|hf-mirror)[^']*'|(?:429|50[0-4]) (?:Client|Server) Error[^\n]*(?:huggingface|hf\.co)`)
	hubRefusedRe     = regexp.MustCompile(`(?i)GatedRepoError|RepositoryNotFoundError|RevisionNotFoundError|Cannot access gated repo|40[13] Client Error[^\n]*(?:huggingface|hf\.co)`)
	diskFullRe       = regexp.MustCompile(`(?i)No space left on device|\bENOSPC\b`)
)

// engineBreak is the layer of an engine's breakage, the action it asks for and what to do: its
// maker's layer when it said; the GPU's in the GPU's own words (gpuError); the infrastructure's when
// the model hub could not be reached, the host's on a full disk (neither says anything of the GPU
// or the engine); the engine's, to rerun, on a device fault (deviceFaultWords); else the engine's
// (its configuration too: a model the hub refused).
func engineBreak(given, text string) (layer, action, advice string) {
	switch {
	case given != "":
		return given, actionFor(given), ""
	case gpuError(text):
		return results.LayerGPU, results.ActionResetGPU, ""
	case hubUnreachableRe.MatchString(text):
		return results.LayerInfra, results.ActionRerun, "the engine could not fetch the model from its hub (the network, a proxy or the hub, not the GPU or the engine): give the node the hub or a mirror (HF_ENDPOINT, model_cache.endpoint), or fill the model cache first (model_cache), and rerun; where the node does reach the hub, a gated or private model without its token (the variable engine.token_env names) reads the same"
	case diskFullRe.MatchString(text):
		return results.LayerHost, results.ActionRerun, "the host's disk is full: free space where the engine writes the model and its caches (model_cache.dir, HF_HOME, /tmp) and rerun"
	case hubRefusedRe.MatchString(text):
		return results.LayerEngine, results.ActionFixEngine, "the model hub refused the model: a gated or private model needs the hub token in the variable engine.token_env names (HF_TOKEN), and a wrong id or revision needs fixing in the config"
	case deviceFault(text):
		return results.LayerEngine, results.ActionRerun, deviceFaultWords
	}
	return results.LayerEngine, results.ActionFixEngine, ""
}

// healthFindings are a host's health findings: its flags and the phase's own breakage.
func healthFindings(host string, hh *results.Health) []results.Finding {
	var out []results.Finding
	for _, f := range hh.Flags {
		out = append(out, flagFinding(host, nil, flagStatus(f), f))
	}
	for _, g := range hh.GPUs {
		for _, f := range g.Flags {
			out = append(out, flagFinding(host, []int{g.GPU.Index}, flagStatus(f), f))
		}
		for _, b := range healthBreaks(&g) {
			out = append(out, brokeFinding(b.layer, hh.Disruption, results.Finding{Host: host, GPUs: []int{g.GPU.Index},
				Subject: gpuSubject(g.GPU), Check: CheckHealthError, Reason: "the health phase did not finish: " + b.what}))
		}
	}
	if hh.Error != "" {
		out = append(out, brokeFinding(errorLayer(hh.ErrorLayer, hh.Error, results.LayerHost), hh.Disruption, results.Finding{
			Host: host, Subject: "health", Check: CheckHealthError, Reason: "the health phase did not finish: " + hh.Error}))
	}
	return out
}

// brokeFinding is f, the finding of a phase that broke in layer l, with its status and action: failed,
// or inconclusive where something outside the hardware stopped it (disruption).
func brokeFinding(l, disruption string, f results.Finding) results.Finding {
	f.Layer, f.Status, f.Action = l, results.StatusFailed, actionFor(l)
	if disruption != "" {
		f.Status = results.StatusInconclusive
	}
	return f
}

// hostFindings gathers every finding of a host.
func hostFindings(h *results.Host) []results.Finding {
	var out []results.Finding
	for _, f := range h.Flags {
		out = append(out, flagFinding(h.Name, nil, results.StatusFlag, f))
	}
	if h.Discovery.Error != "" {
		l := errorLayer("", h.Discovery.Error, results.LayerHost)
		out = append(out, results.Finding{Layer: l, Status: results.StatusFailed, Host: h.Name, Subject: "discovery", Check: "discovery.error",
			Reason: "no GPUs could be discovered: " + h.Discovery.Error, Action: results.ActionRebootNode})
	}
	if h.Error != "" {
		out = append(out, brokeFinding(errorLayer(h.ErrorLayer, h.Error, results.LayerInfra), h.Disruption, results.Finding{
			Host: h.Name, Subject: "host " + h.Name, Check: "host.error", Reason: "the host's run did not finish: " + h.Error}))
	}
	if h.Health != nil {
		out = append(out, healthFindings(h.Name, h.Health)...)
	}
	for _, m := range h.Models {
		for _, f := range m.Flags {
			out = append(out, flagFinding(h.Name, nil, results.StatusFlag, f))
		}
		if m.Error != "" {
			out = append(out, results.Finding{Layer: results.LayerEngine, Status: results.StatusFailed, Host: h.Name, Subject: m.Model, Check: "model.error",
				Reason: m.Model + ": " + m.Error, Action: results.ActionFixEngine})
		}
		for ei := range m.Endpoints {
			out = append(out, endpointFindings(h.Name, m.Model, &m.Endpoints[ei])...)
		}
		if f, ok := undecidedComparisons(h.Name, &m); ok {
			out = append(out, f)
		}
	}
	return out
}

// undecidedComparisons is the finding of a model's GPU-to-GPU comparisons that could not decide (a
// GPU another figure flagged aside), whose layer is undecidedLayer's, or the client's when it fell
// behind.
func undecidedComparisons(host string, m *results.Model) (results.Finding, bool) {
	var metrics []string
	var gpus []int
	client, why := false, ""
	flagged := map[int]bool{} // a GPU another figure flagged: its undecided figures add nothing
	for _, c := range m.Comparisons {
		for _, cell := range c.Values {
			flagged[cell.GPU] = flagged[cell.GPU] || cell.Flagged && cell.GPU >= 0
		}
	}
	for _, c := range m.Comparisons {
		undecided := c.LowConfidence
		for _, cell := range c.Values {
			if cell.Inconclusive && !flagged[cell.GPU] {
				undecided = true
				if cell.GPU >= 0 && !slices.Contains(gpus, cell.GPU) {
					gpus = append(gpus, cell.GPU)
				}
				if why == "" {
					why = cell.Reason
				}
			}
		}
		if !undecided {
			continue
		}
		metrics = append(metrics, c.Metric)
		client = client || c.ClientLimited
		if why == "" {
			why = c.Note
		}
	}
	if len(metrics) == 0 {
		return results.Finding{}, false
	}
	slices.Sort(gpus)
	what := fmt.Sprintf("GPU-to-GPU comparison undecided in %d of %d figures (%s)", len(metrics), len(m.Comparisons), strings.Join(metrics, ", "))
	f := results.Finding{Layer: undecidedLayer(why), Status: results.StatusInconclusive, Host: host, GPUs: gpus, Subject: m.Model,
		Check: checkUndecided, Reason: what + ": " + why, Action: results.ActionRerun}
	if client {
		f.Layer, f.Check = results.LayerClient, checkClientLimited
		f.Reason = what + ": the load generator fell behind its schedule while it loaded these GPUs at once, so it set the pace, not the GPUs: give gpuvet more CPU, or load fewer GPUs at once (--parallel-gpus), and rerun"
	}
	return f, true
}

// rollLayers sets a host's layers, its hardware status and the action its hardware findings ask for.
func rollLayers(h *results.Host, fs []results.Finding) {
	h.Layers, h.Action = worstByLayer(fs), ""
	for _, f := range fs {
		if results.HardwareLayer(f.Layer) && f.Status != results.StatusInconclusive {
			h.Action = results.MoreDisruptive(h.Action, f.Action)
		}
	}
	h.HardwareStatus = hardwareStatus(h)
}

// hardwareStatus is what a gate, a drain or a taint acts on: the worst of the host's hardware
// findings and its GPUs' verdicts; another layer's failure leaves it not proven, never failed.
func hardwareStatus(h *results.Host) results.Status {
	var st results.Status
	for _, g := range h.GPUs {
		st = results.Worse(st, g.Status)
	}
	for l, s := range h.Layers {
		switch {
		case results.HardwareLayer(l):
			st = results.Worse(st, s)
		case s == results.StatusFailed || s == results.StatusInconclusive:
			st = results.Worse(st, results.StatusInconclusive)
		}
	}
	if h.Status == results.StatusInterrupted || h.Status == results.StatusIncomplete {
		st = results.Worse(st, h.Status)
	}
	if st == "" || st == results.StatusSkipped || st == results.StatusNotRun {
		if h.Status == results.StatusOK {
			return results.StatusOK
		}
		return results.StatusInconclusive
	}
	return st
}

// rollFindings gathers the run's findings and sets each host's and the run's layers and action.
func rollFindings(s *results.Summary) {
	s.Findings, s.Layers, s.Action = nil, nil, ""
	for hi := range s.Hosts {
		h := &s.Hosts[hi]
		fs := hostFindings(h)
		rollLayers(h, fs)
		s.Findings = append(s.Findings, fs...)
		if h.Action != "" {
			s.Action = results.MoreDisruptive(s.Action, h.Action)
		}
	}
	if s.Error != "" {
		s.Findings = append(s.Findings, results.Finding{Layer: results.LayerInfra, Status: results.StatusFailed, Subject: "run", Check: "run.error",
			Reason: s.Error, Action: results.ActionRerun})
	}
	s.Layers = worstByLayer(s.Findings)
}

// worstByLayer is the worst status of the findings of each layer (nil: no finding).
func worstByLayer(fs []results.Finding) map[string]results.Status {
	var out map[string]results.Status
	for _, f := range fs {
		if out == nil {
			out = map[string]results.Status{}
		}
		out[f.Layer] = results.Worse(out[f.Layer], f.Status)
	}
	return out
}

// healthyGPUs are the GPUs of a host whose own health checks ran and passed: the evidence that
// clears a GPU of a gate its endpoint missed.
func healthyGPUs(h *results.Host) map[int]bool {
	out := map[int]bool{}
	if h.Health == nil {
		return out
	}
	for _, g := range h.Health.GPUs {
		ok := g.Status == results.StatusOK
		for _, f := range g.Flags {
			ok = ok && !results.GPULayer(withKind(f).Layer)
		}
		for _, c := range h.Health.Comparisons {
			for _, cell := range c.Values {
				ok = ok && !(cell.GPU == g.GPU.Index && cell.Flagged)
			}
		}
		out[g.GPU.Index] = ok
	}
	return out
}

// gateLayers gives each gate an endpoint missed its layer: a gate measures the whole serving stack, so
// it is the GPU's only where the GPU's own checks do not clear it. On a GPU whose health passed and
// whose load raised no GPU finding, the miss is the engine's: under the engine-bound share of the
// roofline it sets the figure (fix it); at or above, the gate does not fit (calibrate). The expected
// throughput's miss stays the GPU's unless the engine's speed moved more than margin within the run.
// Without health it stays the GPU's, to rerun; on a shared GPU it is the host's, to rerun.
func gateLayers(ep *results.Endpoint, healthy map[int]bool, margin float64) {
	cleared := len(ep.GPUs) > 0
	for _, g := range ep.GPUs {
		cleared = cleared && healthy[g]
	}
	for _, f := range ep.Flags {
		if !strings.HasPrefix(f.Check, checkGatePrefix) && results.GPULayer(withKind(f).Layer) {
			cleared = false // the load itself showed the GPU misbehave (throttled, XID, …)
		}
	}
	sol, moved := ep.SpeedOfLight, spreadOf(ep.Load, speedFigure)
	for i := range ep.Flags {
		f := &ep.Flags[i]
		if !strings.HasPrefix(f.Check, checkGatePrefix) || f.Check == CheckErrorRate {
			continue
		}
		switch {
		case SharedGPU(ep): // another process's load slowed it as much as anything of the GPU's
			f.Layer, f.Action = results.LayerHost, results.ActionRerun
			f.Reason = withoutAdvice(f.Reason) + fmt.Sprintf("; not the GPU's alone: another process shared it (%s), so the miss may be that process's: stop it and rerun", busyOf(ep).Reason)
		case !cleared && len(healthy) == 0:
			f.Layer, f.Action = results.LayerGPU, results.ActionRerun
			f.Reason += "; no health phase ran to tell the GPU from the engine: rerun with health"
		case !cleared:
			f.Layer, f.Action = results.LayerGPU, results.ActionResetGPU
		case sol != nil && sol.BoundOutputTokS > 0 && sol.Percent < results.DefaultOf(results.ThEngineBoundSOLPct):
			f.Layer, f.Action = results.LayerEngine, results.ActionFixEngine
			f.Reason = withoutAdvice(f.Reason) + fmt.Sprintf("; the engine's, not the GPU's: the GPU passed its own checks and the engine serves %.1f %% of its roofline (%s tok/s of %s, under the %s %% an engine-bound run is read at): fix or change the engine",
				sol.Percent, fmtNum(sol.MeasuredOutputTokS), fmtNum(sol.BoundOutputTokS), fmtNum(results.DefaultOf(results.ThEngineBoundSOLPct)))
		case f.Check == CheckExpected && moved > margin:
			f.Layer, f.Action = results.LayerEngine, results.ActionFixEngine
			f.Reason = withoutAdvice(f.Reason) + fmt.Sprintf("; the engine's, not the GPU's: the GPU passed its own checks and the engine's speed moved %.0f %% between the run's synchronous blocks, more than the gate's %g %% margin: steady the engine (its host's CPU, co-tenants) and rerun",
				moved, margin)
		case f.Check == CheckExpected:
			f.Layer, f.Action = results.LayerGPU, results.ActionResetGPU
		default:
			f.Layer, f.Action = results.LayerEngine, results.ActionCalibrate
			f.Reason = withoutAdvice(f.Reason) + "; not the GPU's: the GPU passed its own checks" + solWords(sol) + ": the gate does not fit this GPU and model; calibrate it (`gpuvet calibrate`) or set it"
		}
	}
}

// withoutAdvice is a gate's reason without the advice that assumes the GPU (advice).
func withoutAdvice(reason string) string {
	for _, a := range []string{": check the GPU's", ": this GPU × model is slower"} {
		if i := strings.Index(reason, a); i >= 0 {
			return reason[:i]
		}
	}
	return reason
}

func withKind(f results.Flag) results.Flag {
	classify(&f)
	return f
}

func solWords(sol *results.SpeedOfLight) string {
	if sol == nil || sol.BoundOutputTokS <= 0 {
		return ""
	}
	return fmt.Sprintf(" and the engine serves %.1f %% of its roofline", sol.Percent)
}
