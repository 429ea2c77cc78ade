package k8s

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A failed image pull the kubelet retries is given kubernetes.start_grace; one whose image or
// credentials are wrong fails at once. The messages are the kubelet's and containerd's own words.
func TestStartGrace(t *testing.T) {
	const img = `"registry.example/vllm/vllm-openai:v0.11.0"`
	transient := []struct{ reason, msg string }{
		{"ErrImagePull", `failed to pull and unpack image ` + img + `: failed to copy: httpReadSeeker: failed open: unexpected status code https://registry.example/v2/vllm/vllm-openai/blobs/sha256:4f1: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit`},
		{"ErrImagePull", `failed to pull and unpack image ` + img + `: failed to resolve reference ` + img + `: failed to do request: Head "https://127.0.0.1:1/v2/vllm/vllm-openai/manifests/v0.11.0": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"ImagePullBackOff", `Back-off pulling image ` + img + `: ErrImagePull: failed to pull and unpack image ` + img + `: read tcp 10.0.0.5:51234->104.16.0.1:443: read: connection reset by peer`},
		{"RegistryUnavailable", `image pull failed for registry.example/vllm/vllm-openai:v0.11.0 because the registry is unavailable: i/o timeout`},
	}
	final := []struct{ reason, msg string }{
		{"ErrImagePull", `failed to pull and unpack image ` + img + `: failed to resolve reference ` + img + `: registry.example/vllm/vllm-openai:v0.11.0: not found`},
		{"ErrImagePull", `failed to pull and unpack image ` + img + `: failed to resolve reference ` + img + `: pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`},
		{"ErrImagePull", `failed to pull and unpack image ` + img + `: failed to resolve reference ` + img + `: unexpected status from HEAD request to https://registry.example/v2/vllm/vllm-openai/manifests/v0.11.0: 401 Unauthorized`},
		{"ImagePullBackOff", `Back-off pulling image ` + img + `: ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image ` + img + `: manifest unknown`},
		{"InvalidImageName", `Failed to apply default image tag "Registry.Example/VLLM:": couldn't parse image name: invalid reference format`},
		{"SignatureValidationFailed", `image pull failed for registry.example/vllm/vllm-openai:v0.11.0 because the signature validation failed: no signature`},
	}
	pod := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0", UID: "u1"}, Status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{Name: "engine", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	for _, c := range transient {
		pw := newStartWait(time.Hour)
		if pe := podProblem(pod(c.reason, c.msg), nil, pw); pe != nil {
			t.Errorf("%s %.60q… within its grace: %v, want a wait", c.reason, c.msg, pe)
		}
		pw.since["u1/engine"] = time.Now().Add(-61 * time.Minute) // failing since before the grace
		pe := podProblem(pod(c.reason, c.msg), nil, pw)
		if pe == nil || pe.Reason != c.reason || !strings.Contains(pe.Detail, "kubernetes.start_grace (1h0m0s)") || !strings.Contains(pe.Detail, c.msg) {
			t.Fatalf("%s past its grace: %v, want the grace and the kubelet's words", c.reason, pe)
		}
		if l := results.LayerOfError(fmt.Errorf("engine not ready: %w", pe)); l != results.LayerInfra {
			t.Errorf("%s past its grace: layer %q, want the infrastructure's (the registry, its network)", c.reason, l)
		}
		if pe := podProblem(pod(c.reason, c.msg), nil, nil); pe == nil {
			t.Errorf("%s on a pod that ended (no grace): nil, want the problem", c.reason)
		}
	}
	for _, c := range final {
		if pe := podProblem(pod(c.reason, c.msg), nil, newStartWait(time.Hour)); pe == nil || pe.Reason != c.reason || pe.Detail != c.msg || pe.Layer() != "" {
			t.Errorf("%s %.60q…: %v, want it at once, in the kubelet's words, the layer left to the judge (the engine's image)", c.reason, c.msg, pe)
		}
	}
}

// A pull that fails and then succeeds within the grace ends in a Ready engine, not a failed node.
func TestWaitPodsReadyOutlastsATransientPullError(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0", Namespace: "ns", UID: "u1"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "engine", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ErrImagePull", Message: "failed to pull and unpack image: 429 Too Many Requests"}}}}}}
	cs := fake.NewClientset(p)
	done := make(chan error, 1)
	go func() {
		done <- WaitPodsReady(context.Background(), cs, "ns", []string{"engine-0"}, time.Minute, time.Minute)
	}()
	select {
	case err := <-done:
		t.Fatalf("the wait ended on a pull the kubelet retries: %v", err)
	case <-time.After(time.Second):
	}
	ready := p.DeepCopy()
	ready.Status.Phase = corev1.PodRunning
	ready.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods("ns").UpdateStatus(context.Background(), ready, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the pull succeeded: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not see the pod Ready")
	}
}

// A pod Kubernetes keeps failing to start (its network sandbox on a node whose CNI is broken, a
// volume that does not mount) fails its node once that has gone on past the grace, in Kubernetes'
// words, not at engine.ready_timeout with "raise engine.ready_timeout".
func TestStalledStartFailsAfterTheGrace(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0", Namespace: "ns", UID: "u1", CreationTimestamp: ago(10 * time.Minute)},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "engine",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	const cni = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "4d1c": plugin type="calico" failed (add): stat /var/lib/calico/nodename: no such file or directory`
	event := func(name, reason, msg string, first, last time.Duration) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Type: corev1.EventTypeWarning, Reason: reason, Message: msg, Count: 12,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "engine-0", UID: "u1"}, FirstTimestamp: ago(first), LastTimestamp: ago(last)}
	}
	cases := []struct {
		name   string
		events []*corev1.Event
		mod    func(*corev1.Pod)
		want   string // the error's words ("" : the wait goes on)
	}{
		{"sandbox failing for 6 minutes", []*corev1.Event{event("e1", "FailedCreatePodSandBox", cni, 6*time.Minute, 20*time.Second)}, nil,
			"FailedCreatePodSandBox: " + cni + " (Kubernetes has tried for 6m"}, // 6m0s, or 6m1s on a slow machine
		{"a mount failing for 7 minutes", []*corev1.Event{event("e2", "FailedMount", `MountVolume.SetUp failed for volume "cache" : mount failed: exit status 32`, 7*time.Minute, time.Minute)}, nil,
			"FailedMount: MountVolume.SetUp failed"},
		{"sandbox failing for 2 minutes: within the grace", []*corev1.Event{event("e3", "FailedCreatePodSandBox", cni, 2*time.Minute, 10*time.Second)}, nil, ""},
		{"a mount that failed once, 8 minutes ago, and then worked", []*corev1.Event{event("e4", "FailedMount", `object "ns"/"kube-root-ca.crt" not registered`, 8*time.Minute, 8*time.Minute)}, nil, ""},
		{"a pod whose container ran", []*corev1.Event{event("e5", "FailedCreatePodSandBox", cni, 6*time.Minute, 20*time.Second)},
			func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
			}, ""},
		{"other warnings decide nothing", []*corev1.Event{event("e6", "Unhealthy", "Readiness probe failed: connection refused", 9*time.Minute, time.Second)}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case its own clientset, so its own watch; most wait out the timeout
			p := pod.DeepCopy()
			if c.mod != nil {
				c.mod(p)
			}
			objs := []runtime.Object{p}
			for _, e := range c.events {
				objs = append(objs, e)
			}
			cs := fake.NewClientset(objs...)
			err := WaitPodsReady(context.Background(), cs, "ns", []string{"engine-0"}, 3*time.Second, 5*time.Minute)
			switch {
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v, want %q", err, c.want)
			case c.want != "" && !strings.Contains(err.Error(), "past kubernetes.start_grace 5m0s"):
				t.Errorf("%v: the message does not name the grace", err)
			case c.want != "" && results.LayerOfError(err) != results.LayerInfra:
				t.Errorf("%v: layer %q, want the infrastructure's", err, results.LayerOfError(err))
			case c.want == "" && (err == nil || !strings.Contains(err.Error(), "not ready: engine-0")):
				t.Errorf("%v, want the wait to reach its timeout", err)
			case c.want == "" && !strings.Contains(err.Error(), "its last warning: "+c.events[0].Reason):
				t.Errorf("%v: the timeout's message lacks the pod's last warning", err)
			}
		})
	}
}
