package k8s

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// pendingNode is a user's node (its own labels, annotations, taints) that joined pending.
func pendingNode(name string) *corev1.Node {
	n := userNode(name)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintPending, Effect: corev1.TaintEffectNoSchedule})
	return n
}

func vettedCondition(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == ConditionVetted {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

var gate = Verdicts{Gate: true, ValidFor: 168 * time.Hour, PendingRetries: 3}

// A pending node found ok is released: the pending taint goes, the condition says True, the
// verdict's expiry is the run's time plus verdict_valid_for; the user's own things stay.
func TestGatePendingOKIsReleased(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(pendingNode("n1"))
	at := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	did, err := ApplyVerdict(ctx, cs, "n1", Verdict{Status: results.StatusOK, RunID: "r1", At: at}, gate)
	if err != nil {
		t.Fatal(err)
	}
	n := node(t, cs, "n1")
	userKept(t, n)
	if hasTaint(n.Spec.Taints, TaintPending) || len(gpuvetTaints(n)) != 0 {
		t.Errorf("taints after ok: %v", n.Spec.Taints)
	}
	if n.Annotations[AnnotationValidUntil] != "2026-12-10T03:00:00Z" {
		t.Errorf("valid-until %q", n.Annotations[AnnotationValidUntil])
	}
	c := vettedCondition(n)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "Passed" || !strings.Contains(c.Message, "gpuvet run r1: ok") {
		t.Errorf("condition %+v", c)
	}
	if !strings.Contains(did, "released: lifted "+TaintPending) {
		t.Errorf("said %q", did)
	}
	if Due(n, at.Add(time.Hour)) != "" || !strings.HasPrefix(Due(n, at.Add(169*time.Hour)), "verdict expired") {
		t.Errorf("due an hour later %q, a week later %q", Due(n, at.Add(time.Hour)), Due(n, at.Add(169*time.Hour)))
	}
}

// A pending straggler (flagged node to node) does not pass the gate: the quarantine replaces the
// pending taint, with its reason, and the condition says False with the reason.
func TestGatePendingStragglerIsQuarantined(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(pendingNode("n1"))
	reason := "compare.node_to_node (output_tok_s): 31 % below the median of the other nodes"
	if _, err := ApplyVerdict(ctx, cs, "n1", Verdict{Status: results.StatusFlag, RunID: "r2", At: time.Now(), Reason: reason}, gate); err != nil {
		t.Fatal(err)
	}
	n := node(t, cs, "n1")
	userKept(t, n)
	if hasTaint(n.Spec.Taints, TaintPending) {
		t.Errorf("still pending: %v", n.Spec.Taints)
	}
	if g := gpuvetTaints(n); len(g) != 1 || g[0].Value != "r2" || !strings.Contains(n.Annotations[AnnotationUnhealthyReason], reason) {
		t.Errorf("quarantine %v, reason %q", g, n.Annotations[AnnotationUnhealthyReason])
	}
	c := vettedCondition(n)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "Flagged" || !strings.Contains(c.Message, reason) {
		t.Errorf("condition %+v", c)
	}
	// A node that is not pending and flagged keeps working under the gate alone (only
	// --taint-flagged taints it); its condition still says False.
	cs = fake.NewClientset(userNode("n2"))
	if _, err := ApplyVerdict(ctx, cs, "n2", Verdict{Status: results.StatusFlag, RunID: "r2", At: time.Now(), Reason: reason}, gate); err != nil {
		t.Fatal(err)
	}
	if n := node(t, cs, "n2"); len(gpuvetTaints(n)) != 0 || vettedCondition(n) == nil || vettedCondition(n).Status != corev1.ConditionFalse {
		t.Errorf("in-service flagged node: taints %v condition %+v", n.Spec.Taints, vettedCondition(n))
	}
}

// An undecided pending node stays pending, with the reason and a count; at the limit the run
// says it needs a person, and it still stays pending. An ok run then releases it and clears both.
func TestGatePendingInconclusiveStaysPending(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(pendingNode("n1"))
	f := &Fleet{Cluster: &Cluster{Client: cs}, Verdicts: gate, run: &Run{nodes: []Node{{Name: "n1"}}}}
	for i := 1; i <= 3; i++ {
		s := &results.Summary{RunID: fmt.Sprintf("r%d", i), Hosts: []results.Host{{Name: "n1", Status: results.StatusInconclusive,
			Flags: []results.Flag{{Check: "gates.ttft_p95", Reason: "12 samples, 30 needed"}}}}}
		if err := f.ApplyVerdicts(ctx, s); err != nil {
			t.Fatal(err)
		}
		n := node(t, cs, "n1")
		if !hasTaint(n.Spec.Taints, TaintPending) || n.Annotations[AnnotationPendingAttempts] != fmt.Sprint(i) ||
			!strings.Contains(n.Annotations[AnnotationPendingReason], "12 samples, 30 needed") {
			t.Fatalf("run %d: taints %v annotations %v", i, n.Spec.Taints, n.Annotations)
		}
		c := vettedCondition(n)
		loud := strings.Contains(strings.Join(s.Caveats, "\n"), "NEEDS A PERSON: node n1 undecided 3 runs in a row")
		if c == nil || c.Status != corev1.ConditionUnknown || (i == 3) != loud || (i == 3) != (c.Reason == "RetriesExhausted") {
			t.Errorf("run %d: condition %+v, caveats %q", i, c, s.Caveats)
		}
	}
	s := &results.Summary{RunID: "r4", Hosts: []results.Host{{Name: "n1", Status: results.StatusOK}}}
	if err := f.ApplyVerdicts(ctx, s); err != nil {
		t.Fatal(err)
	}
	n := node(t, cs, "n1")
	if hasTaint(n.Spec.Taints, TaintPending) || n.Annotations[AnnotationPendingAttempts] != "" || n.Annotations[AnnotationPendingReason] != "" {
		t.Errorf("after ok: taints %v annotations %v", n.Spec.Taints, n.Annotations)
	}
	if c := vettedCondition(n); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("condition %+v", c)
	}
}

// fleetOf is a judged fleet of n nodes whose first failed ones failed (the rest ok).
func fleetOf(n, failed int, mods ...func(*corev1.Node)) (*fake.Clientset, []Node, *results.Summary) {
	var objs []*corev1.Node
	var nodes []Node
	s := &results.Summary{RunID: "r-breaker"}
	for i := range n {
		name := fmt.Sprintf("gpu-%03d", i)
		nd := gpuNode(name, 8, mods...)
		nd.ResourceVersion = "1"
		objs = append(objs, nd)
		nodes = append(nodes, Node{Name: name})
		st := results.StatusOK
		if i%5 < 2 && failed > 0 { // 2 in every 5: 40 %
			st = results.StatusFailed
			failed--
		}
		s.Hosts = append(s.Hosts, results.Host{Name: name, Status: st, Error: "engine image pull: not found"})
	}
	cs := fake.NewClientset()
	for _, o := range objs {
		_ = cs.Tracker().Add(o)
	}
	return cs, nodes, s
}

// Issue 46: 200 nodes, 40 % failing, max_unhealthy 10 %: 20 are quarantined, the other 60 are
// recorded as what would have been done and are not tainted, and the run fails in the breaker's words.
func TestBreakerStopsTaintsAtTheLimit(t *testing.T) {
	ctx := context.Background()
	cs, nodes, s := fleetOf(200, 80)
	limit, _ := fleet.ParseMaxUnhealthy("10%")
	f := &Fleet{Cluster: &Cluster{Client: cs}, Verdicts: Verdicts{Label: true, TaintFailed: true, MaxUnhealthy: limit, ValidFor: time.Hour}, run: &Run{nodes: nodes}}
	err := f.ApplyVerdicts(ctx, s)
	if err == nil || !strings.Contains(err.Error(), "circuit breaker: 80 of 200 nodes failed (limit 10 %): nothing more tainted; is the setting wrong?") {
		t.Fatalf("err %v", err)
	}
	nl, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	tainted := 0
	for _, n := range nl.Items {
		tainted += len(gpuvetTaints(&n))
		if c := vettedCondition(&n); c == nil || n.Labels[LabelStatus] == "" {
			t.Errorf("node %s: no label or condition: held quarantines still record the verdict", n.Name)
		}
	}
	held := 0
	for _, a := range s.Fleet.NodeActions {
		if a.Held != "" {
			held++
			if n := node(t, cs, a.Node); len(gpuvetTaints(n)) != 0 || a.Status != results.StatusFailed {
				t.Errorf("held node %s is tainted or was not failed: %v %s", a.Node, n.Spec.Taints, a.Status)
			}
		}
	}
	if tainted != 20 || held != 60 || len(s.Fleet.NodeActions) != 200 {
		t.Errorf("tainted %d, held %d, actions %d; want 20, 60, 200", tainted, held, len(s.Fleet.NodeActions))
	}
	// At the limit exactly, the run does not trip.
	cs, nodes, s = fleetOf(200, 20)
	f = &Fleet{Cluster: &Cluster{Client: cs}, Verdicts: Verdicts{TaintFailed: true, MaxUnhealthy: limit}, run: &Run{nodes: nodes}}
	if err := f.ApplyVerdicts(ctx, s); err != nil {
		t.Errorf("20 of 200 failed, limit 10 %%: %v", err)
	}
}

// A dry run changes nothing on any node (same resourceVersion, same object, only reads sent)
// and records every action it would take; the same run without it changes them.
func TestDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	pending := func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintPending, Effect: corev1.TaintEffectNoSchedule})
	}
	limit, _ := fleet.ParseMaxUnhealthy("10%")
	v := Verdicts{Label: true, TaintFailed: true, Gate: true, DryRun: true, MaxUnhealthy: limit, ValidFor: time.Hour, PendingRetries: 3}
	cs, nodes, s := fleetOf(20, 8, pending)
	before, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	cs.ClearActions()
	f := &Fleet{Cluster: &Cluster{Client: cs}, Verdicts: v, run: &Run{nodes: nodes}}
	err := f.ApplyVerdicts(ctx, s)
	if err == nil || !strings.Contains(err.Error(), "circuit breaker: 8 of 20 nodes failed (limit 10 %)") {
		t.Errorf("the dry run tells what the breaker would do: %v", err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a dry run sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	after, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for i := range before.Items {
		b, a := before.Items[i], after.Items[i]
		if b.ResourceVersion != a.ResourceVersion || !reflect.DeepEqual(b, a) {
			t.Errorf("node %s changed in a dry run: resourceVersion %s -> %s", b.Name, b.ResourceVersion, a.ResourceVersion)
		}
	}
	would := 0
	for _, a := range s.Fleet.NodeActions {
		if !a.DryRun || len(a.Did) == 0 {
			t.Errorf("node %s: %+v", a.Node, a)
		}
		for _, d := range a.Did {
			if !strings.HasPrefix(d, "dry run: would have ") {
				t.Errorf("node %s: %q", a.Node, d)
			}
			if strings.Contains(d, "released") || strings.Contains(d, "tainted") {
				would++
			}
		}
	}
	if would != 12+2 { // 12 ok released, 2 failed quarantined (the breaker holds the other 6)
		t.Errorf("%d release or taint actions told, want 14", would)
	}
	// The same run, for real, changes every node (the fake API keeps no resourceVersion of its
	// own: the objects themselves are compared; the real API server's test compares versions).
	v.DryRun = false
	f.Verdicts = v
	s.Fleet = nil
	_ = f.ApplyVerdicts(ctx, s)
	after, _ = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for i := range before.Items {
		if reflect.DeepEqual(before.Items[i], after.Items[i]) {
			t.Errorf("node %s: not written by the real run: the check above proves nothing", before.Items[i].Name)
		}
	}
}

// Due nodes are vetted first: pending, then expired or never vetted, then the rest; --nodes
// takes them first, and --only-due skips the others with their expiry.
func TestChooseNodesDueFirst(t *testing.T) {
	now := time.Now().UTC()
	valid := func(d time.Duration) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Annotations = map[string]string{AnnotationValidUntil: now.Add(d).Format(time.RFC3339)}
		}
	}
	cs := fake.NewClientset(gpuNode("a", 8, valid(time.Hour)), gpuNode("b", 8, valid(-time.Hour)), gpuNode("c", 8, valid(time.Hour), func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: TaintPending, Effect: corev1.TaintEffectNoSchedule}}
	}), gpuNode("d", 8))
	tols := OwnTolerations()
	nodes, _, err := ChooseNodes(context.Background(), cs, Selection{Tolerations: tols})
	var got []string
	for _, n := range nodes {
		got = append(got, n.Name+":"+strings.Fields(n.Due + " -")[0])
	}
	if err != nil || strings.Join(got, ",") != "c:pending,b:verdict,d:no,a:-" {
		t.Errorf("order %v %v", got, err)
	}
	nodes, skipped, _ := ChooseNodes(context.Background(), cs, Selection{Tolerations: tols, Max: 2})
	if len(nodes) != 2 || nodes[0].Name != "c" || nodes[1].Name != "b" || len(skipped) != 2 {
		t.Errorf("--nodes 2: %v skipped %v", nodes, skipped)
	}
	nodes, skipped, _ = ChooseNodes(context.Background(), cs, Selection{Tolerations: tols, OnlyDue: true})
	if len(nodes) != 3 || len(skipped) != 1 || skipped[0].Name != "a" || !strings.Contains(skipped[0].Reason, "not due: verdict valid until") {
		t.Errorf("--only-due: %v skipped %v", nodes, skipped)
	}
	// Without gpuvet's tolerations a pending node is not chosen: the pending taint keeps others off.
	if _, skipped, _ := ChooseNodes(context.Background(), cs, Selection{}); len(skipped) != 1 || !strings.Contains(skipped[0].Reason, TaintPending) {
		t.Errorf("a pending node without the toleration: skipped %v", skipped)
	}
}
