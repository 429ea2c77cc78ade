package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// 40 % of a fleet fail with the never-ready node, spread over it; the one-node run's node and the
// straggler stay out; without a share, one node fails as before.
func TestInjectedShare(t *testing.T) {
	for _, n := range []int{8, 50, 200, 1000} {
		in := injectedFor(n, 0.4)
		f := in.failed()
		seen := map[string]bool{}
		for _, name := range f {
			if seen[name] || name == nodeName(0) || name == in.Straggler {
				t.Errorf("%d nodes: %s twice, or the one-node run's, or the straggler", n, name)
			}
			seen[name] = true
		}
		if want := int(0.4*float64(n) + 0.5); len(f) != want {
			t.Errorf("%d nodes: %d fail, want %d", n, len(f), want)
		}
		if !slices.Contains(f, in.NeverReady) {
			t.Errorf("%d nodes: the never-ready node is not among the failed", n)
		}
	}
	if in := injectedFor(200, 0); len(in.failed()) != 2 || in.Failed[0] != nodeName(100) {
		t.Errorf("no share: %+v", in)
	}
	// Every wave of 64 nodes has its share of failed ones.
	in := injectedFor(200, 0.4)
	for w := 0; w < 3; w++ {
		k := 0
		for _, name := range in.Failed {
			var i int
			fmt.Sscanf(strings.TrimPrefix(name, "kwok-gpu-"), "%d", &i)
			if i >= 64*w && i < 64*(w+1) {
				k++
			}
		}
		if k < 20 {
			t.Errorf("wave %d: %d failed nodes", w, k)
		}
	}
}

// The breaker check passes a run that stopped at its limit and held the rest, and names each way
// a run can get it wrong.
func TestCheckBreaker(t *testing.T) {
	const n = 20 // 40 %: 8 failed, 7 of them on their GPUs (the 8th never ready: its engine); 10 %: 2 tainted, 5 held
	in := injectedFor(n, 0.4)
	failed := in.Failed
	good := func() (*outcome, map[string]string) {
		s := &results.Summary{RunID: "r1", Fleet: &results.Fleet{}}
		taints := map[string]string{}
		for i, name := range failed {
			a := results.NodeAction{Node: name, Status: results.StatusFailed}
			if i < 2 {
				taints[name] = "r1"
			} else {
				a.Held = "node " + name + ": taint …"
			}
			s.Fleet.NodeActions = append(s.Fleet.NodeActions, a)
		}
		return &outcome{Summary: s, ExitCode: 1, Stderr: "gpuvet: WARNING: --taint-failed (kubernetes.taint_failed): circuit breaker: 7 of 20 nodes failed (limit 10 %): nothing more tainted"}, taints
	}
	o, taints := good()
	b, bad := checkBreaker(o, in, n, 10, false, taints, nil)
	if len(bad) > 0 || b.Limit != 2 || len(b.Tainted) != 2 || len(b.Held) != 5 || len(failed) != 7 {
		t.Fatalf("a right run: %+v %q", b, bad)
	}
	cases := map[string]func(o *outcome, taints map[string]string){
		"is tainted but did not fail": func(_ *outcome, taints map[string]string) { taints[in.Straggler] = "r1" },
		"held, want 5":                func(o *outcome, _ map[string]string) { o.Summary.Fleet.NodeActions[6].Held = "" },
		"held in fleet.node_actions yet tainted": func(_ *outcome, taints map[string]string) {
			delete(taints, failed[0])
			taints[failed[6]] = "r1"
		},
		"1 node(s) tainted, want the breaker's limit 2": func(_ *outcome, taints map[string]string) { delete(taints, failed[0]) },
		"not this run's":                         func(_ *outcome, taints map[string]string) { taints[failed[0]] = "r0" },
		"exit 0, want 1":                         func(o *outcome, _ map[string]string) { o.ExitCode = 0 },
		"want 1 with \"circuit breaker: 7 of 20": func(o *outcome, _ map[string]string) { o.Stderr = "failed" },
	}
	for want, spoil := range cases {
		o, taints := good()
		spoil(o, taints)
		if _, bad := checkBreaker(o, in, n, 10, false, taints, nil); !strings.Contains(strings.Join(bad, "\n"), want) {
			t.Errorf("%s: got %q", want, bad)
		}
	}
}

// With the gate, the straggler is quarantined too (counted by the breaker), the held nodes and the
// never-ready one stay pending, and every other node leaves pending.
func TestCheckBreakerGate(t *testing.T) {
	const n = 20
	in := injectedFor(n, 0.4)
	q := append(append([]string{}, in.Failed...), in.Straggler) // 8 quarantinable, limit 2
	good := func() (*outcome, map[string]string, map[string]bool) {
		s := &results.Summary{RunID: "r1", Fleet: &results.Fleet{}}
		taints, pending := map[string]string{}, map[string]bool{in.NeverReady: true}
		for i, name := range q {
			a := results.NodeAction{Node: name, Status: results.StatusFailed}
			if i < 2 {
				taints[name] = "r1"
			} else {
				a.Held, pending[name] = "node "+name+": taint …", true
			}
			s.Fleet.NodeActions = append(s.Fleet.NodeActions, a)
		}
		return &outcome{Summary: s, ExitCode: 1, Stderr: "circuit breaker: 8 of 20 nodes failed (limit 10 %): nothing more tainted"}, taints, pending
	}
	o, taints, pending := good()
	b, bad := checkBreaker(o, in, n, 10, true, taints, pending)
	if len(bad) > 0 || len(b.Held) != 6 || len(b.Pending) != 7 || b.Released != 11 {
		t.Fatalf("a right run: %+v %q", b, bad)
	}
	cases := map[string]func(o *outcome, taints map[string]string, pending map[string]bool){
		"still pending that the gate should have released": func(_ *outcome, _ map[string]string, p map[string]bool) { p[nodeName(0)] = true },
		"no longer pending that should be":                 func(_ *outcome, _ map[string]string, p map[string]bool) { delete(p, in.NeverReady) },
		"7 of 20 nodes failed": func(o *outcome, _ map[string]string, _ map[string]bool) {
			o.Stderr = "circuit breaker: 7 of 20 nodes failed (limit 10 %)"
		},
	}
	for want, spoil := range cases {
		o, taints, pending := good()
		spoil(o, taints, pending)
		if _, bad := checkBreaker(o, in, n, 10, true, taints, pending); !strings.Contains(strings.Join(bad, "\n"), want) {
			t.Errorf("%s: got %q", want, bad)
		}
	}
}

// Resetting a node takes off gpuvet's marks only.
func TestUnmark(t *testing.T) {
	nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n",
		Labels:      map[string]string{"type": "kwok", k8s.LabelStatus: "failed"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", k8s.AnnotationValidUntil: "2026-12-04T00:00:00Z"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "user", Effect: corev1.TaintEffectNoSchedule},
			{Key: k8s.TaintUnhealthy, Value: "r1", Effect: corev1.TaintEffectNoSchedule}, {Key: k8s.TaintPending, Effect: corev1.TaintEffectNoSchedule}}}}
	if !marked(nd) {
		t.Fatal("a node with gpuvet's marks is not marked")
	}
	unmark(nd)
	if marked(nd) || len(nd.Spec.Taints) != 1 || nd.Spec.Taints[0].Key != "user" || nd.Labels["type"] != "kwok" || len(nd.Labels) != 1 || len(nd.Annotations) != 1 {
		t.Errorf("after unmark: %+v %+v %+v", nd.Labels, nd.Annotations, nd.Spec.Taints)
	}
}
