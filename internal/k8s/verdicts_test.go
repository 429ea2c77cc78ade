package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// ApplyVerdict writes vd onto node as Fleet.ApplyVerdicts would, with no circuit breaker, and
// returns what it did, in words ("" nothing).
func ApplyVerdict(ctx context.Context, cs kubernetes.Interface, node string, vd Verdict, v Verdicts) (string, error) {
	c, err := applyVerdict(ctx, cs, node, nil, vd, v, func(string) bool { return true })
	return strings.Join(c.did, "; "), err
}

// userNode is a GPU node carrying its owner's own label, annotation and taints.
func userNode(name string) *corev1.Node {
	return gpuNode(name, 8, func(n *corev1.Node) {
		n.Labels["team"] = "inference"
		n.Annotations = map[string]string{"owner": "ops"}
		n.Spec.Taints = []corev1.Taint{
			{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule},
			{Key: TaintUnhealthy, Value: "user-set", Effect: corev1.TaintEffectNoExecute}, // not gpuvet's: another effect
		}
	})
}

func node(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// userKept fails unless the node still has everything its owner put there.
func userKept(t *testing.T, n *corev1.Node) {
	t.Helper()
	if n.Labels["team"] != "inference" || n.Labels[ProductLabel] != "NVIDIA-H200" || n.Annotations["owner"] != "ops" {
		t.Errorf("node %s: the user's labels/annotations changed: %v %v", n.Name, n.Labels, n.Annotations)
	}
	var user int
	for _, tn := range n.Spec.Taints {
		if (tn.Key == "dedicated" && tn.Value == "llm" && tn.Effect == corev1.TaintEffectNoSchedule) ||
			(tn.Key == TaintUnhealthy && tn.Value == "user-set" && tn.Effect == corev1.TaintEffectNoExecute) {
			user++
		}
	}
	if user != 2 {
		t.Errorf("node %s: the user's taints changed: %v", n.Name, n.Spec.Taints)
	}
}

func gpuvetTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if noSchedule(TaintUnhealthy, "")(t) {
			out = append(out, t)
		}
	}
	return out
}

func TestApplyVerdictLabelsAndTaints(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(userNode("n1"))
	at := time.Date(2026, 12, 1, 16, 30, 0, 0, time.UTC)
	all := Verdicts{Label: true, TaintFailed: true}

	did, err := ApplyVerdict(ctx, cs, "n1", Verdict{Status: results.StatusFailed, RunID: "20261201T163000Z-aaaa0001", At: at, Reason: "health.burn: gpu 3 computes wrong answers"}, all)
	if err != nil {
		t.Fatal(err)
	}
	n := node(t, cs, "n1")
	userKept(t, n)
	if n.Labels[LabelStatus] != "failed" || n.Labels[LabelVettedBy] != "20261201T163000Z-aaaa0001" || n.Annotations[AnnotationVettedAt] != "2026-12-01T16:30:00Z" {
		t.Errorf("labels %v annotations %v", n.Labels, n.Annotations)
	}
	if g := gpuvetTaints(n); len(g) != 1 || g[0].Value != "20261201T163000Z-aaaa0001" {
		t.Errorf("gpuvet taints %v, want one with the run id", g)
	}
	if r := n.Annotations[AnnotationUnhealthyReason]; !strings.Contains(r, "run 20261201T163000Z-aaaa0001") || !strings.Contains(r, "failed: health.burn: gpu 3 computes wrong answers") {
		t.Errorf("reason annotation %q", r)
	}
	if !strings.Contains(did, "labelled gpuvet.io/status=failed") || !strings.Contains(did, "tainted gpuvet.io/unhealthy=20261201T163000Z-aaaa0001:NoSchedule") {
		t.Errorf("said %q", did)
	}

	// A later run that fails it again replaces the taint (one, naming the latest run).
	if _, err := ApplyVerdict(ctx, cs, "n1", Verdict{Status: results.StatusFailed, RunID: "20261202T000000Z-bbbb0002", At: at}, all); err != nil {
		t.Fatal(err)
	}
	n = node(t, cs, "n1")
	userKept(t, n)
	if g := gpuvetTaints(n); len(g) != 1 || g[0].Value != "20261202T000000Z-bbbb0002" {
		t.Errorf("after a second failed run: gpuvet taints %v, want the one of the second run", g)
	}

	// A flagged node is not tainted with --taint-failed alone, only with --taint-flagged; a node
	// that passes keeps its quarantine (a person lifts it) and is told so.
	did, err = ApplyVerdict(ctx, cs, "n1", Verdict{Status: results.StatusOK, RunID: "20261203T000000Z-cccc0003", At: at}, all)
	if err != nil {
		t.Fatal(err)
	}
	n = node(t, cs, "n1")
	if n.Labels[LabelStatus] != "ok" || len(gpuvetTaints(n)) != 1 || !strings.Contains(did, "still tainted") || !strings.Contains(did, "gpuvet clean --untaint --run 20261202T000000Z-bbbb0002") {
		t.Errorf("ok after failed: status %s, taints %v, said %q", n.Labels[LabelStatus], n.Spec.Taints, did)
	}
	cs2 := fake.NewClientset(userNode("n2"))
	if _, err := ApplyVerdict(ctx, cs2, "n2", Verdict{Status: results.StatusFlag, RunID: "r1", At: at}, all); err != nil {
		t.Fatal(err)
	}
	if g := gpuvetTaints(node(t, cs2, "n2")); len(g) != 0 {
		t.Errorf("flag with --taint-failed only: tainted %v", g)
	}
	if _, err := ApplyVerdict(ctx, cs2, "n2", Verdict{Status: results.StatusFlag, RunID: "r2", At: at}, Verdicts{TaintFlagged: true}); err != nil {
		t.Fatal(err)
	}
	n = node(t, cs2, "n2")
	userKept(t, n)
	if g := gpuvetTaints(n); len(g) != 1 || g[0].Value != "r2" || n.Labels[LabelStatus] != "flag" {
		t.Errorf("flag with --taint-flagged: taints %v, status label %q (from the first run's --label-nodes)", g, n.Labels[LabelStatus])
	}
	// Without --label-nodes, a taint alone writes no status label.
	cs3 := fake.NewClientset(userNode("n3"))
	if _, err := ApplyVerdict(ctx, cs3, "n3", Verdict{Status: results.StatusFailed, RunID: "r3", At: at}, Verdicts{TaintFailed: true}); err != nil {
		t.Fatal(err)
	}
	if n := node(t, cs3, "n3"); n.Labels[LabelStatus] != "" || len(gpuvetTaints(n)) != 1 {
		t.Errorf("--taint-failed alone: labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	// A status that is no verdict (interrupted) writes nothing.
	cs4 := fake.NewClientset(userNode("n4"))
	if did, err := ApplyVerdict(ctx, cs4, "n4", Verdict{Status: results.StatusInterrupted, RunID: "r4", At: at}, all); err != nil || did != "" {
		t.Errorf("interrupted: %q %v", did, err)
	}
	if n := node(t, cs4, "n4"); n.Labels[LabelStatus] != "" || len(gpuvetTaints(n)) != 0 {
		t.Errorf("interrupted: labels %v taints %v", n.Labels, n.Spec.Taints)
	}
}

func TestUntaintLiftsOnlyGpuvets(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(userNode("a"), userNode("b"), userNode("c"))
	at := time.Now()
	for n, run := range map[string]string{"a": "run-1", "b": "run-2"} {
		if _, err := ApplyVerdict(ctx, cs, n, Verdict{Status: results.StatusFailed, RunID: run, At: at, Reason: "x"}, Verdicts{Label: true, TaintFailed: true}); err != nil {
			t.Fatal(err)
		}
	}
	done, err := Untaint(ctx, cs, "run-1")
	if err != nil || len(done) != 1 || !strings.Contains(done[0], "node a: lifted taint gpuvet.io/unhealthy=run-1:NoSchedule") {
		t.Fatalf("untaint --run run-1: %q %v", done, err)
	}
	a, b := node(t, cs, "a"), node(t, cs, "b")
	userKept(t, a)
	if len(gpuvetTaints(a)) != 0 || a.Annotations[AnnotationUnhealthyReason] != "" {
		t.Errorf("node a keeps gpuvet's taint or reason: %v %v", a.Spec.Taints, a.Annotations)
	}
	// The gate: a repaired node is pending until a run finds it ok.
	if !hasTaint(a.Spec.Taints, TaintPending) || !strings.Contains(a.Annotations[AnnotationPendingReason], "lifted by `gpuvet clean --untaint`") || hasTaint(b.Spec.Taints, TaintPending) {
		t.Errorf("node a after untaint: %v %v; node b %v", a.Spec.Taints, a.Annotations, b.Spec.Taints)
	}
	if a.Labels[LabelStatus] != "failed" || a.Labels[LabelVettedBy] != "run-1" || a.Annotations[AnnotationVettedAt] == "" {
		t.Errorf("node a lost its status labels (the last verdict stays): %v", a.Labels)
	}
	if g := gpuvetTaints(b); len(g) != 1 || b.Annotations[AnnotationUnhealthyReason] == "" {
		t.Errorf("--run run-1 touched run-2's node b: %v", b.Spec.Taints)
	}
	done, err = Untaint(ctx, cs, "")
	if err != nil || len(done) != 1 || !strings.Contains(done[0], "node b:") {
		t.Fatalf("untaint (every run): %q %v", done, err)
	}
	for _, name := range []string{"a", "b", "c"} {
		n := node(t, cs, name)
		userKept(t, n)
		if len(gpuvetTaints(n)) != 0 {
			t.Errorf("node %s: %v", name, n.Spec.Taints)
		}
	}
	if done, err := Untaint(ctx, cs, ""); err != nil || len(done) != 0 {
		t.Errorf("a second untaint: %q %v", done, err)
	}
}

// gpuvet's own pods tolerate its quarantine taint, so a later run still chooses the node; other
// NoSchedule taints still need --tolerations.
func TestChooseNodesVetsQuarantinedNode(t *testing.T) {
	q := gpuNode("q", 8, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: TaintUnhealthy, Value: "run-1", Effect: corev1.TaintEffectNoSchedule}}
	})
	cs := fake.NewClientset(q)
	nodes, skipped, err := ChooseNodes(context.Background(), cs, Selection{Tolerations: []corev1.Toleration{OwnToleration}})
	if err != nil || len(nodes) != 1 || len(skipped) != 0 {
		t.Fatalf("nodes %v skipped %v err %v", nodes, skipped, err)
	}
	q.Spec.Taints = append(q.Spec.Taints, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule})
	cs = fake.NewClientset(q)
	if _, skipped, _ := ChooseNodes(context.Background(), cs, Selection{Tolerations: []corev1.Toleration{OwnToleration}}); len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "dedicated") {
		t.Errorf("a user's taint is not tolerated by gpuvet's own toleration: skipped %v", skipped)
	}
}

func TestVerdictAccess(t *testing.T) {
	cs := fake.NewClientset()
	var asked []string
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		res := ra.Resource
		if ra.Subresource != "" {
			res += "/" + ra.Subresource
		}
		asked = append(asked, ra.Verb+" "+res+" "+ra.Namespace)
		r.Status.Allowed = !(ra.Verb == "patch" && ra.Resource == "nodes")
		return true, r, nil
	})
	ctx := context.Background()
	if err := CheckVerdictAccess(ctx, cs, Verdicts{}); err != nil || len(asked) != 0 {
		t.Fatalf("no verdicts asked: %v, asked %v", err, asked)
	}
	err := CheckVerdictAccess(ctx, cs, Verdicts{Label: true})
	if err == nil || !strings.Contains(err.Error(), "--label-nodes (kubernetes.label_nodes): missing RBAC permission: patch nodes (cluster-wide)") {
		t.Errorf("label: %v", err)
	}
	// Every verdict reads the node (its condition) and writes it and its status (GPUVetted).
	if strings.Join(asked, ",") != "get nodes ,patch nodes ,patch nodes/status " {
		t.Errorf("--label-nodes asked %v, want get, patch nodes and patch nodes/status", asked)
	}
	asked = nil
	err = CheckVerdictAccess(ctx, cs, Verdicts{TaintFailed: true})
	if err == nil || !strings.Contains(err.Error(), "--taint-failed (kubernetes.taint_failed): missing RBAC permission: patch nodes") {
		t.Errorf("taint: %v", err)
	}
	if strings.Join(asked, ",") != "get nodes ,patch nodes ,patch nodes/status " {
		t.Errorf("--taint-failed asked %v, want get, patch nodes and patch nodes/status", asked)
	}
	asked = nil
	if err := CheckVerdictAccess(ctx, cs, Verdicts{Gate: true, DryRun: true}); err != nil || strings.Join(asked, ",") != "get nodes " {
		t.Errorf("a dry run asked %v (%v), want get nodes only", asked, err)
	}
}

func TestHostReasonAndTruncate(t *testing.T) {
	h := results.Host{Error: "run failed: engines not ready", Flags: []results.Flag{{Check: "compare.node_to_node", Reason: "slower"}},
		Health: &results.Health{GPUs: []results.GPUHealth{{Flags: []results.Flag{{Check: "health.result_check", Subject: "gpu 3", Reason: "wrong answer"}}}}},
		Models: []results.Model{{Error: "run failed: engines not ready", Endpoints: []results.Endpoint{{Error: "HTTP 500"}}}}}
	if got := fleet.HostReason(h); got != "run failed: engines not ready; compare.node_to_node: slower; health.result_check (gpu 3): wrong answer; HTTP 500" {
		t.Errorf("HostReason %q", got)
	}
	long := strings.Repeat("é", 2000)
	if s := truncate(long, maxReason); len(s) > maxReason || !strings.HasSuffix(s, " …") || !strings.HasPrefix(s, "éé") {
		t.Errorf("truncate: %d bytes, %q…", len(s), s[:10])
	}
}
