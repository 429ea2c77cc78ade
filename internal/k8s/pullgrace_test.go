package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A failed image pull the kubelet retries is given kubernetes.image_pull_grace; one whose image or
// credentials are wrong fails at once. The messages are the kubelet's and containerd's own words.
func TestImagePullGrace(t *testing.T) {
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
		pw := newPullWait(time.Hour)
		if pe := podProblem(pod(c.reason, c.msg), nil, pw); pe != nil {
			t.Errorf("%s %.60q… within its grace: %v, want a wait", c.reason, c.msg, pe)
		}
		pw.since["u1/engine"] = time.Now().Add(-61 * time.Minute) // failing since before the grace
		pe := podProblem(pod(c.reason, c.msg), nil, pw)
		if pe == nil || pe.Reason != c.reason || !strings.Contains(pe.Detail, "kubernetes.image_pull_grace (1h0m0s)") || !strings.Contains(pe.Detail, c.msg) {
			t.Errorf("%s past its grace: %v, want the grace and the kubelet's words", c.reason, pe)
		}
		if pe := podProblem(pod(c.reason, c.msg), nil, nil); pe == nil {
			t.Errorf("%s on a pod that ended (no grace): nil, want the problem", c.reason)
		}
	}
	for _, c := range final {
		if pe := podProblem(pod(c.reason, c.msg), nil, newPullWait(time.Hour)); pe == nil || pe.Reason != c.reason || pe.Detail != c.msg {
			t.Errorf("%s %.60q…: %v, want it at once, in the kubelet's words", c.reason, c.msg, pe)
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
