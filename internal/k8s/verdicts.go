package k8s

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Verdicts a cluster can act on (docs/kubernetes.md, "Labels and taints"): each judged node can
// carry its status as labels, and a failed (or flagged) one a NoSchedule quarantine taint. They
// outlive the run, so they are not in its manifest: the node objects are the record, and the
// taint's value names the run for `gpuvet clean --untaint [--run ID]`.
const (
	// LabelStatus is the node's judged status: ok, inconclusive, flag or failed.
	LabelStatus = Domain + "status"
	// LabelVettedBy is the id of the run that judged it (a label value cannot hold an RFC 3339 time).
	LabelVettedBy = Domain + "run"
	// LabelAction is what the node's hardware findings ask for (results.Actions), for a fleet's
	// own automation to select on.
	LabelAction = Domain + "action"
	// AnnotationVettedAt is when it was judged, RFC 3339 UTC.
	AnnotationVettedAt = Domain + "vetted-at"
	// TaintUnhealthy is the quarantine taint's key (effect NoSchedule, value the run id).
	TaintUnhealthy = Domain + "unhealthy"
	// AnnotationUnhealthyReason says why the node was tainted (the run, its status, its reasons).
	AnnotationUnhealthyReason = Domain + "unhealthy-reason"
)

// maxReason bounds the reason annotation: a few reasons, far below the API's 256 KiB.
const maxReason = 2048

// OwnToleration lets gpuvet's own pods onto a node gpuvet quarantined: the next run vets it again
// (other workloads stay off until `gpuvet clean --untaint`).
var OwnToleration = corev1.Toleration{Key: TaintUnhealthy, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// Verdicts says what a run writes onto its judged nodes (kubernetes.label_nodes, taint_failed,
// taint_flagged, gate) and how it is bounded (max_unhealthy, dry_run). Any of them also sets the
// node condition GPUVetted and the verdict's expiry (gate.go).
type Verdicts struct {
	Label          bool
	TaintFailed    bool
	TaintFlagged   bool               // taints flagged nodes as well as failed ones
	Gate           bool               // releases a pending node found ok, quarantines a flag or failed one
	DryRun         bool               // no action on any node: every one it would take is printed and recorded
	MaxUnhealthy   fleet.MaxUnhealthy // bounds the quarantines of one run (fleet.Breaker)
	ValidFor       time.Duration      // how long a verdict holds (the valid-until annotation); 0: no expiry written
	PendingRetries int                // undecided runs in a row before a pending node needs a person
}

func (v Verdicts) any() bool      { return v.Label || v.tainting() || v.Gate }
func (v Verdicts) tainting() bool { return v.TaintFailed || v.TaintFlagged }

// taints tells whether a node of status st gets the taint.
func (v Verdicts) taints(st results.Status) bool {
	return (v.tainting() && st == results.StatusFailed) || (v.TaintFlagged && st == results.StatusFlag)
}

// flags names the settings asking for it, for error messages.
func (v Verdicts) flags() string {
	var f []string
	for _, s := range []struct {
		on   bool
		what string
	}{{v.Label, "--label-nodes (kubernetes.label_nodes)"}, {v.TaintFailed, "--taint-failed (kubernetes.taint_failed)"},
		{v.TaintFlagged, "--taint-flagged (kubernetes.taint_flagged)"}, {v.Gate, "--gate (kubernetes.gate)"}} {
		if s.on {
			f = append(f, s.what)
		}
	}
	return strings.Join(f, " and ")
}

// Needs is what writing verdicts asks of the API beyond a run's own: each node is read, patched
// (the taint list replaced whole, guarded by its resourceVersion) and its condition patched through
// the status subresource. A dry run only reads.
func (v Verdicts) Needs() []Permission {
	if !v.any() {
		return nil
	}
	p := []Permission{{Verb: "get", Resource: "nodes"}, {Verb: "patch", Resource: "nodes"},
		{Verb: "patch", Resource: "nodes", Subresource: "status"}}
	if v.DryRun {
		return p[:1]
	}
	return p
}

// UntaintNeeds is what `gpuvet clean --untaint` asks of the API.
func UntaintNeeds() []Permission {
	return []Permission{{Verb: "list", Resource: "nodes"}, {Verb: "patch", Resource: "nodes"}}
}

// CheckVerdictAccess checks v's permissions before anything is created; the error names the
// settings that need them.
func CheckVerdictAccess(ctx context.Context, cs kubernetes.Interface, v Verdicts) error {
	if !v.any() {
		return nil
	}
	if err := CheckAccess(ctx, cs, "", "", v.Needs()); err != nil {
		return fmt.Errorf("%s: %w", v.flags(), err)
	}
	return nil
}

// Verdict is one judged node's status as the run writes it onto the node.
type Verdict struct {
	Status results.Status
	RunID  string
	At     time.Time
	Reason string // why it is not ok (for the taint's annotation)
	// Hardware is the node's hardware status (results.Host.GateStatus), what the taints and the
	// gate act on; "" is Status.
	Hardware results.Status
	Action   string // what the hardware findings ask for (results.Actions; "" none): LabelAction
}

// gate is the status the taints and the gate act on: the node's hardware status.
func (vd Verdict) gate() results.Status { return cmp.Or(vd.Hardware, vd.Status) }

// labelled reports whether a status is one the status label holds.
func labelled(st results.Status) bool {
	return st == results.StatusOK || st == results.StatusInconclusive || st == results.StatusFlag || st == results.StatusFailed
}

// applyVerdict plans vd on the node and writes it (v.DryRun: only plans). read, if not nil, is the
// node as just read (read again on a conflict). allow is the circuit breaker, asked once, only when
// the verdict would quarantine the node. A taint replaces an older gpuvet taint; a node that passes
// keeps it (a person lifts a quarantine: `gpuvet clean --untaint`). The user's own labels,
// annotations and taints are never touched.
func applyVerdict(ctx context.Context, cs kubernetes.Interface, node string, read *corev1.Node, vd Verdict, v Verdicts, allow func(what string) bool) (change, error) {
	if !labelled(vd.Status) || !v.any() {
		return change{}, nil
	}
	var c change
	asked, allowed := false, true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := read, error(nil)
		if read = nil; n == nil {
			n, err = cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		if !asked && v.wantsQuarantine(n, vd.gate()) {
			asked = true
			allowed = allow(fmt.Sprintf("node %s: taint %s=%s:NoSchedule", node, TaintUnhealthy, vd.RunID))
		}
		c = planVerdict(n, vd, v, allowed)
		if v.DryRun || c.empty() {
			return nil
		}
		meta, patch := map[string]any{}, map[string]any{}
		if len(c.labels) > 0 {
			meta["labels"] = c.labels
		}
		if len(c.ann) > 0 {
			meta["annotations"] = c.ann
		}
		if c.taints != nil {
			meta["resourceVersion"] = n.ResourceVersion
			patch["spec"] = map[string]any{"taints": c.taints}
		}
		if len(meta) == 0 {
			return nil
		}
		patch["metadata"] = meta
		return patchNode(ctx, cs, node, patch)
	})
	if err != nil || v.DryRun || c.cond == nil {
		return c, err
	}
	b, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{*c.cond}}})
	if err != nil {
		return c, err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, b, metav1.PatchOptions{FieldManager: "gpuvet"}, "status"); err != nil {
		return c, fmt.Errorf("condition %s: %w", ConditionVetted, err)
	}
	return c, nil
}

// Untaint lifts gpuvet's quarantine taints (every run's, or only runID's) and their reason
// annotations, and puts the pending taint in their place: a repaired node takes no work until a
// run finds it ok (`kubectl taint nodes NODE gpuvet.io/validation-pending-` releases it without
// one). The user's taints and gpuvet's status labels stay. It returns what it lifted.
func Untaint(ctx context.Context, cs kubernetes.Interface, runID string) ([]string, error) {
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	done, derr := untaintDevices(ctx, cs, runID)
	errs := []error{derr}
	for _, n := range nl.Items {
		if gpuvetTaint(n.Spec.Taints, runID) == nil {
			continue
		}
		var lifted *corev1.Taint
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lifted = gpuvetTaint(cur.Spec.Taints, runID); lifted == nil {
				return nil
			}
			ann := map[string]any{}
			for _, k := range []string{AnnotationUnhealthyReason, AnnotationPendingAttempts} {
				if _, ok := cur.Annotations[k]; ok {
					ann[k] = nil
				}
			}
			ann[AnnotationPendingReason] = truncate(fmt.Sprintf("quarantine %s lifted by `gpuvet clean --untaint` at %s: pending until a run finds it ok", lifted.ToString(), time.Now().UTC().Format(time.RFC3339)), maxReason)
			meta := map[string]any{"resourceVersion": cur.ResourceVersion, "annotations": ann}
			taints := withoutTaint(cur.Spec.Taints, TaintUnhealthy, runID)
			if !hasTaint(taints, TaintPending) {
				taints = append(taints, corev1.Taint{Key: TaintPending, Effect: corev1.TaintEffectNoSchedule})
			}
			return patchNode(ctx, cs, cur.Name, map[string]any{"metadata": meta, "spec": map[string]any{"taints": taints}})
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		if lifted != nil {
			done = append(done, fmt.Sprintf("node %s: lifted taint %s (run %s); now %s:NoSchedule until a run finds it ok", n.Name, lifted.ToString(), lifted.Value, TaintPending))
		}
	}
	return done, errors.Join(errs...)
}

// gpusAlone takes the node's failed GPUs out of scheduling alone where the cluster can
// (devices.go): it returns what it did and the verdict the node itself then gets, its hardware
// status that of its other GPUs. Where it cannot (or the breaker holds it), vd is returned as it
// was, for the node taint, with why in words when the node publishes DRA devices.
func gpusAlone(ctx context.Context, cs kubernetes.Interface, h *results.Host, n *corev1.Node, vd Verdict, v Verdicts, allow func(string) bool) ([]string, Verdict, string) {
	if !v.tainting() && !v.Gate {
		return nil, vd, ""
	}
	taken := slices.DeleteFunc(takenGPUs(h, v), func(g results.GPUVerdict) bool { return !v.wantsQuarantine(n, g.Status) })
	if len(taken) == 0 || !v.wantsQuarantine(n, vd.gate()) {
		return nil, vd, ""
	}
	devs, why := findDevices(ctx, cs, h.Name, taken)
	if why != "" {
		if why == noDRA { // the common case, not said
			why = ""
		}
		return nil, vd, why
	}
	if !allow(fmt.Sprintf("node %s: DeviceTaintRules for %d GPU(s)", h.Name, len(devs))) {
		return nil, vd, "" // the node's own quarantine is held next, and says so
	}
	did, err := taintDevices(ctx, cs, h.Name, devs, vd, v.DryRun)
	if err != nil {
		return append(did, "the whole node instead: "+err.Error()), vd, ""
	}
	var names []string
	for _, d := range devs {
		names = append(names, fmt.Sprint(d.gpu))
	}
	vd.Hardware = restStatus(h, taken)
	vd.Reason = fmt.Sprintf("gpu %s taken alone (DeviceTaintRules); %s", strings.Join(names, ", "), vd.Reason)
	return did, vd, ""
}

// patchNode applies a JSON merge patch to a node (a resourceVersion in it makes it conditional).
func patchNode(ctx context.Context, cs kubernetes.Interface, node string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "gpuvet"})
	return err
}

// gpuvetTaint is gpuvet's quarantine taint among taints (of runID, when not ""), nil when none.
func gpuvetTaint(taints []corev1.Taint, runID string) *corev1.Taint {
	if i := slices.IndexFunc(taints, noSchedule(TaintUnhealthy, runID)); i >= 0 {
		return &taints[i]
	}
	return nil
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len(" …")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " …"
}

// ApplyVerdicts writes each vetted node's judged status onto it (fleet.Verdicter), once the merged
// summary is judged, so a label is the node's final status, not its in-pod one. Every node is
// tried; the error names those that could not be written. A circuit breaker bounds the quarantines
// (kubernetes.max_unhealthy): past it the rest are recorded as what would have been done, and the
// run fails. A dry run writes nothing. Each node's actions go into fleet.node_actions.
func (f *Fleet) ApplyVerdicts(ctx context.Context, s *results.Summary) error {
	v := f.Verdicts
	if f.run == nil || !v.any() {
		return nil
	}
	vetted := map[string]bool{}
	for _, n := range f.run.Nodes() {
		vetted[n.Name] = true
	}
	breaker := fleet.NewBreaker(v.MaxUnhealthy, len(vetted))
	now := time.Now().UTC()
	say := f.run.progress
	var nodes []*nodeVerdict // in the summary's order
	for _, h := range s.Hosts {
		if !vetted[h.Name] {
			continue
		}
		// The hardware's status: a broken engine or a client that could not decide quarantines no
		// node (it stays pending, not proven).
		st := h.GateStatus()
		if !labelled(h.Status) || !labelled(st) {
			say("node %s: status %s: no verdict to write", h.Name, h.Status)
			continue
		}
		nodes = append(nodes, &nodeVerdict{h: h, vd: Verdict{Status: h.Status, Hardware: st, RunID: s.RunID, At: now, Reason: fleet.HostReason(h), Action: h.Action}})
	}
	// Every node is read at once, the breaker asked in the summary's order (not in which write
	// ends first), then every node written at once: one after another would take minutes.
	cs := f.Cluster.Client
	workqueue.ParallelizeUntil(ctx, verdictWorkers, len(nodes), func(i int) {
		nodes[i].node, nodes[i].err = cs.CoreV1().Nodes().Get(ctx, nodes[i].h.Name, metav1.GetOptions{})
	})
	for _, nv := range nodes {
		if nv.node == nil && nv.err == nil { // the context ended before its read
			nv.err = fmt.Errorf("not read: %w", context.Cause(ctx))
		}
		nv.allowed = true
		if nv.err == nil && v.wantsQuarantine(nv.node, nv.vd.gate()) { // one node, one quarantine, of its GPUs or of it
			nv.allowed = breaker.Allow(fmt.Sprintf("node %s: taint %s=%s:NoSchedule", nv.h.Name, TaintUnhealthy, nv.vd.RunID))
		}
	}
	workqueue.ParallelizeUntil(ctx, verdictWorkers, len(nodes), func(i int) { nodes[i].write(ctx, cs, v) })
	for _, nv := range nodes {
		if !nv.written && nv.err == nil { // the context ended before its write
			nv.err = fmt.Errorf("not written: %w", context.Cause(ctx))
		}
	}
	var errs []error
	prefix, verb := "", "tainted"
	if v.DryRun {
		prefix, verb = "dry run: would have ", "would have been tainted"
	}
	for _, nv := range nodes {
		act := results.NodeAction{Node: nv.h.Name, Status: nv.h.GateStatus(), DryRun: v.DryRun, Held: nv.c.held, Attention: nv.c.loud}
		for _, d := range nv.did {
			act.Did = append(act.Did, prefix+d)
		}
		if v.ValidFor > 0 {
			until := now.Add(v.ValidFor)
			act.ValidUntil = &until
		}
		if nv.err != nil {
			act.Error = nv.err.Error()
			errs = append(errs, fmt.Errorf("node %s: %w", nv.h.Name, nv.err))
		}
		fleet.RecordAction(s, act)
		if len(act.Did) > 0 {
			say("node %s: %s", nv.h.Name, strings.Join(act.Did, "; "))
		}
		if nv.c.held != "" {
			say("node %s: CIRCUIT BREAKER: %s", nv.h.Name, nv.c.held)
		}
		if nv.c.loud != "" {
			say("node %s: NEEDS A PERSON: %s", nv.h.Name, nv.c.loud)
			s.Caveats = append(s.Caveats, fmt.Sprintf("NEEDS A PERSON: node %s %s", nv.h.Name, nv.c.loud))
		}
	}
	if err := breaker.Err(verb); err != nil {
		errs = append([]error{err}, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", v.flags(), err)
	}
	return nil
}

// verdictWorkers bounds the node reads and writes of ApplyVerdicts in flight at once (the client's
// own rate limit, kubernetes.qps, still paces them).
const verdictWorkers = 16

// nodeVerdict is one vetted node's verdict on its way to the node: read, the breaker's answer,
// what was written.
type nodeVerdict struct {
	h       results.Host
	vd      Verdict
	node    *corev1.Node // as read before the breaker was asked
	allowed bool         // the breaker's answer (true where no quarantine was asked)
	written bool
	c       change
	did     []string
	err     error
}

// write takes the node's failed GPUs out alone where it can, then writes the node's verdict.
func (nv *nodeVerdict) write(ctx context.Context, cs kubernetes.Interface, v Verdicts) {
	if nv.err != nil {
		return
	}
	nv.written = true
	allow := func(string) bool { return nv.allowed }
	alone, vd, wide := gpusAlone(ctx, cs, &nv.h, nv.node, nv.vd, v, allow)
	nv.c, nv.err = applyVerdict(ctx, cs, nv.h.Name, nv.node, vd, v, allow)
	nv.did = append(alone, nv.c.did...)
	if wide != "" { // told after what the node got, not an error of the run
		nv.did = append(nv.did, "the whole node, not its GPUs alone: "+wide)
	}
}
