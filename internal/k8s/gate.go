package k8s

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The acceptance gate (docs/acceptance.md): a node that joins (the cluster's provisioning taints
// it) or comes back from repair (`gpuvet clean --untaint` swaps the quarantine for it) carries
// gpuvet's pending taint, which only gpuvet's pods tolerate, until a run finds it ok.
const (
	// TaintPending is the pending taint's key (effect NoSchedule; its value is free).
	TaintPending = Domain + "validation-pending"
	// AnnotationPendingReason says why a node is still pending (the last undecided run's reasons).
	AnnotationPendingReason = Domain + "pending-reason"
	// AnnotationPendingAttempts counts the runs in a row that could not decide a pending node.
	AnnotationPendingAttempts = Domain + "pending-attempts"
	// AnnotationValidUntil is when the node's verdict expires (RFC 3339 UTC; the run's time plus
	// kubernetes.verdict_valid_for): past it, or without it, the node is due.
	AnnotationValidUntil = Domain + "valid-until"
	// ConditionVetted is the node condition each vetted node gets: True (ok), False (flag or
	// failed), Unknown (inconclusive), with a reason and the run's message.
	ConditionVetted corev1.NodeConditionType = "GPUVetted"
)

// PendingToleration lets gpuvet's own pods onto a pending node, so the gate can vet it.
var PendingToleration = corev1.Toleration{Key: TaintPending, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// OwnTolerations are gpuvet's own taints its pods tolerate: the quarantine (a quarantined node is
// vetted again) and the pending taint (the gate).
func OwnTolerations() []corev1.Toleration {
	return []corev1.Toleration{OwnToleration, PendingToleration}
}

// noSchedule matches key's NoSchedule taint (of value, when not "").
func noSchedule(key, value string) func(corev1.Taint) bool {
	return func(t corev1.Taint) bool {
		return t.Key == key && t.Effect == corev1.TaintEffectNoSchedule && (value == "" || t.Value == value)
	}
}

func hasTaint(taints []corev1.Taint, key string) bool {
	return slices.ContainsFunc(taints, noSchedule(key, ""))
}

// withoutTaint is taints less key's NoSchedule taint (of value, when not ""); never nil (a nil
// list is "unchanged").
func withoutTaint(taints []corev1.Taint, key, value string) []corev1.Taint {
	out := slices.DeleteFunc(slices.Clone(taints), noSchedule(key, value))
	if out == nil {
		out = []corev1.Taint{}
	}
	return out
}

// Due says why a node is due for a run ("" when it is not): pending, verdict expired, or none. A
// run vets due nodes first (ChooseNodes).
func Due(n *corev1.Node, now time.Time) string {
	if hasTaint(n.Spec.Taints, TaintPending) {
		return "pending"
	}
	v, ok := n.Annotations[AnnotationValidUntil]
	if !ok {
		return "no verdict"
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return "unreadable " + AnnotationValidUntil
	}
	if !now.Before(t) {
		return "verdict expired " + v
	}
	return ""
}

// dueRank orders nodes for a run: pending first, then expired or never vetted, then the rest.
func dueRank(why string) int {
	switch {
	case why == "pending":
		return 0
	case why != "":
		return 1
	}
	return 2
}

// condition is the GPUVetted condition for a verdict; an unchanged status keeps its transition time.
func condition(n *corev1.Node, vd Verdict, reason string) corev1.NodeCondition {
	st, why := corev1.ConditionUnknown, "Inconclusive"
	switch vd.Status {
	case results.StatusOK:
		st, why = corev1.ConditionTrue, "Passed"
	case results.StatusFlag:
		st, why = corev1.ConditionFalse, "Flagged"
	case results.StatusFailed:
		st, why = corev1.ConditionFalse, "Failed"
	}
	why = cmp.Or(reason, why)
	msg := fmt.Sprintf("gpuvet run %s: %s", vd.RunID, vd.Status)
	if vd.Reason != "" {
		msg += ": " + vd.Reason
	}
	now := metav1.NewTime(vd.At.UTC().Truncate(time.Second))
	c := corev1.NodeCondition{Type: ConditionVetted, Status: st, Reason: why, Message: truncate(msg, maxReason),
		LastHeartbeatTime: now, LastTransitionTime: now}
	for _, old := range n.Status.Conditions {
		if old.Type == ConditionVetted && old.Status == st && !old.LastTransitionTime.IsZero() {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}

// change is what one verdict does to one node as read (a dry run only tells it).
type change struct {
	labels     map[string]string
	ann        map[string]any // a nil value removes the key
	taints     []corev1.Taint // the whole new list; nil: unchanged
	cond       *corev1.NodeCondition
	did        []string // what it does, in words
	held       string   // the quarantine the breaker held, in words ("": none)
	loud       string   // what a person must hear (a node undecided too often)
	quarantine bool     // it adds gpuvet's quarantine taint (what the breaker counts)
}

func (c *change) empty() bool {
	return len(c.labels) == 0 && len(c.ann) == 0 && c.taints == nil && c.cond == nil
}

// wantsQuarantine tells whether a verdict puts gpuvet's quarantine taint on n: under taint_failed
// a failed (with taint_flagged, flagged) node; under the gate a pending node found flag or failed.
func (v Verdicts) wantsQuarantine(n *corev1.Node, st results.Status) bool {
	pendingFails := v.Gate && hasTaint(n.Spec.Taints, TaintPending) && (st == results.StatusFailed || st == results.StatusFlag)
	return v.taints(st) || pendingFails
}

// planVerdict is what vd does to n under v; allowQuarantine is the circuit breaker's answer
// (false: the quarantine is held, and a pending node stays pending).
func planVerdict(n *corev1.Node, vd Verdict, v Verdicts, allowQuarantine bool) change {
	c := change{ann: map[string]any{}}
	if !labelled(vd.Status) || !v.any() {
		return change{}
	}
	at := vd.At.UTC().Format(time.RFC3339)
	if v.Label {
		action := cmp.Or(vd.Action, results.ActionNone)
		c.labels = map[string]string{LabelStatus: string(vd.Status), LabelVettedBy: vd.RunID, LabelAction: action}
		c.ann[AnnotationVettedAt] = at
		c.did = append(c.did, fmt.Sprintf("labelled %s=%s %s=%s %s=%s", LabelStatus, vd.Status, LabelVettedBy, vd.RunID, LabelAction, action))
	}
	until := ""
	if v.ValidFor > 0 {
		until = vd.At.UTC().Add(v.ValidFor).Format(time.RFC3339)
		c.ann[AnnotationValidUntil] = until
	}
	pending := hasTaint(n.Spec.Taints, TaintPending)
	condReason := ""
	quarantine := v.wantsQuarantine(n, vd.gate()) // the hardware's findings only, never the engine's
	qTaint := corev1.Taint{Key: TaintUnhealthy, Value: vd.RunID, Effect: corev1.TaintEffectNoSchedule}
	switch {
	case quarantine && allowQuarantine:
		c.quarantine = true
		taints := append(withoutTaint(n.Spec.Taints, TaintUnhealthy, ""), qTaint)
		c.ann[AnnotationUnhealthyReason] = truncate(fmt.Sprintf("run %s at %s: %s: %s", vd.RunID, at, vd.Status, vd.Reason), maxReason)
		what := fmt.Sprintf("tainted %s", qTaint.ToString())
		if pending { // the quarantine replaces the pending taint: the node failed the gate
			taints = withoutTaint(taints, TaintPending, "")
			c.ann[AnnotationPendingReason], c.ann[AnnotationPendingAttempts] = nil, nil
			what += " in place of " + TaintPending + " (failed the gate)"
		}
		c.taints = taints
		c.did = append(c.did, what)
	case quarantine:
		c.held = "would have tainted " + qTaint.ToString()
		if pending {
			c.held += " in place of " + TaintPending + " (it stays pending)"
			c.ann[AnnotationPendingReason] = truncate(fmt.Sprintf("run %s at %s: %s, quarantine held by the circuit breaker: %s", vd.RunID, at, vd.Status, vd.Reason), maxReason)
		}
		condReason = "QuarantineHeld"
	case pending && v.Gate && vd.gate() == results.StatusOK:
		c.taints = withoutTaint(n.Spec.Taints, TaintPending, "")
		c.ann[AnnotationPendingReason], c.ann[AnnotationPendingAttempts] = nil, nil
		c.did = append(c.did, "released: lifted "+TaintPending+" (passed the gate)")
	case pending && v.Gate && vd.gate() != results.StatusFlag && vd.gate() != results.StatusFailed:
		tries, _ := strconv.Atoi(n.Annotations[AnnotationPendingAttempts])
		tries = max(tries, 0) + 1
		c.ann[AnnotationPendingAttempts] = strconv.Itoa(tries)
		c.ann[AnnotationPendingReason] = truncate(fmt.Sprintf("run %s at %s: inconclusive (%d in a row): %s", vd.RunID, at, tries, vd.Reason), maxReason)
		c.did = append(c.did, fmt.Sprintf("still pending: inconclusive, attempt %d of %d", tries, v.PendingRetries))
		if v.PendingRetries > 0 && tries >= v.PendingRetries {
			condReason = "RetriesExhausted"
			c.loud = fmt.Sprintf("undecided %d runs in a row (kubernetes.pending_retries %d): it stays pending and needs a person: %s", tries, v.PendingRetries, vd.Reason)
		}
	case pending && !v.Gate:
		c.did = append(c.did, "pending: left as it is (the gate is off: --gate)")
	}
	if old := gpuvetTaint(n.Spec.Taints, ""); old != nil && !c.quarantine {
		c.did = append(c.did, fmt.Sprintf("still tainted %s by run %s (lift it with `gpuvet clean --untaint --run %s`)", old.ToString(), old.Value, old.Value))
	}
	if until != "" { // told after the labels and taints, which say what changes for the node's work
		c.did = append(c.did, fmt.Sprintf("%s=%s", AnnotationValidUntil, until))
	}
	cond := condition(n, vd, condReason)
	c.cond = &cond
	c.did = append(c.did, fmt.Sprintf("condition %s=%s (%s)", cond.Type, cond.Status, cond.Reason))
	// Keys already gone need no removal.
	for k, val := range c.ann {
		if _, ok := n.Annotations[k]; val == nil && !ok {
			delete(c.ann, k)
		}
	}
	return c
}
