package k8s

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 46 on the real API server (GPUVET_TEST_K8S_KUBECONFIG, as the integration tests): a
// 200-node fleet with 40 % failing. A dry run changes no node: no write of gpuvet's in any node's
// managedFields, and the same resourceVersion on every node the cluster's own node controller
// did not touch meanwhile (it taints these heartbeat-less nodes not-ready on its own); the run for real stops at the breaker's limit (20 of 200 quarantined, 60 held and not
// tainted, in the breaker's words), releases every pending node that passed, and writes the
// GPUVetted condition through the status subresource on every node. The nodes are plain Node
// objects (kwok manages only its annotated ones): the verdicts are what is tested, not a run.
func TestKubernetesBreakerAndDryRunOnTheAPIServer(t *testing.T) {
	cl := testControlPlane(t, Limits{QPS: 500, Burst: 1000})
	cs, ctx := cl.Client, context.Background()
	const sel = "gpuvet-test=breaker"
	var nodes []Node
	s := &results.Summary{RunID: "20261203T030000Z-breaker1"}
	t.Cleanup(func() {
		_ = cs.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
	})
	for i := range 200 {
		n := pendingNode(fmt.Sprintf("gpuvet-breaker-%03d", i))
		n.Labels["gpuvet-test"] = "breaker"
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{FieldManager: "gpuvet-test"}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, Node{Name: n.Name})
		st := results.StatusOK
		if i%5 < 2 {
			st = results.StatusFailed
		}
		s.Hosts = append(s.Hosts, results.Host{Name: n.Name, Status: st, Error: "engine image pull: not found"})
	}
	// gpuvetWrote tells whether gpuvet's field manager wrote the node (patches and the status).
	gpuvetWrote := func(n *corev1.Node) bool {
		for _, m := range n.ManagedFields {
			if m.Manager == "gpuvet" {
				return true
			}
		}
		return false
	}
	nodeList := func() []corev1.Node {
		nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(nl.Items) != 200 {
			t.Fatalf("%d nodes: %v", len(nl.Items), err)
		}
		return nl.Items
	}
	versions := func() map[string]string {
		nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(nl.Items) != 200 {
			t.Fatalf("%d nodes: %v", len(nl.Items), err)
		}
		m := map[string]string{}
		for _, n := range nl.Items {
			m[n.Name] = n.ResourceVersion
		}
		return m
	}
	limit, _ := fleet.ParseMaxUnhealthy("10%")
	v := Verdicts{Label: true, TaintFailed: true, Gate: true, DryRun: true, MaxUnhealthy: limit, ValidFor: time.Hour, PendingRetries: 3}
	f := &Fleet{Cluster: cl, Verdicts: v, run: &Run{nodes: nodes}}
	before := versions()
	err := f.ApplyVerdicts(ctx, s)
	if err == nil || !strings.Contains(err.Error(), "circuit breaker: 80 of 200 nodes failed (limit 10 %)") {
		t.Errorf("dry run: %v", err)
	}
	same := 0
	for _, n := range nodeList() {
		if gpuvetWrote(&n) || vettedCondition(&n) != nil || n.Labels[LabelStatus] != "" || n.Annotations[AnnotationValidUntil] != "" ||
			!hasTaint(n.Spec.Taints, TaintPending) || gpuvetTaint(n.Spec.Taints, "") != nil {
			t.Errorf("node %s written in a dry run: managed by %v, taints %v", n.Name, n.ManagedFields, n.Spec.Taints)
		}
		if before[n.Name] == n.ResourceVersion {
			same++
		}
	}
	t.Logf("dry run: %d of 200 nodes at the same resourceVersion (the others changed by the node controller only)", same)

	v.DryRun = false
	f.Verdicts, s.Fleet = v, nil
	t0 := time.Now()
	err = f.ApplyVerdicts(ctx, s)
	t.Logf("the verdicts of 200 nodes read and written in %.2f s", time.Since(t0).Seconds())
	if err == nil || !strings.Contains(err.Error(), "circuit breaker: 80 of 200 nodes failed (limit 10 %): nothing more tainted; is the setting wrong?") {
		t.Errorf("run: %v", err)
	}
	after := versions()
	quarantined, held, released, failedSoFar := 0, 0, 0, 0
	for _, h := range s.Hosts {
		n, err := cs.CoreV1().Nodes().Get(ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		userKept(t, n)
		if after[h.Name] == before[h.Name] || !gpuvetWrote(n) {
			t.Errorf("node %s not written", h.Name)
		}
		c := vettedCondition(n)
		pending, q := hasTaint(n.Spec.Taints, TaintPending), gpuvetTaint(n.Spec.Taints, s.RunID) != nil
		switch {
		case h.Status == results.StatusOK && !pending && !q && c != nil && c.Status == corev1.ConditionTrue:
			released++
		case h.Status == results.StatusFailed && q && !pending && c != nil && c.Status == corev1.ConditionFalse && c.Reason == "Failed" && failedSoFar < 20:
			quarantined++ // the breaker lets through the first failed nodes in the summary's order, whichever write ends first
		case h.Status == results.StatusFailed && !q && pending && c != nil && c.Status == corev1.ConditionFalse && c.Reason == "QuarantineHeld":
			held++
		default:
			t.Errorf("node %s (%s, failed node %d in the summary's order): taints %v condition %+v", h.Name, h.Status, failedSoFar, n.Spec.Taints, c)
		}
		if h.Status == results.StatusFailed {
			failedSoFar++
		}
	}
	if quarantined != 20 || held != 60 || released != 120 {
		t.Errorf("quarantined %d, held %d, released %d; want 20, 60, 120", quarantined, held, released)
	}
}
