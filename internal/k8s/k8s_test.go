package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

func gpuNode(name string, gpus int64, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ProductLabel: "NVIDIA-H200"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func gpuPod(node string, gpus int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user-" + node, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func TestChooseNodes(t *testing.T) {
	cs := fake.NewClientset(
		gpuNode("a", 8, func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("95500m") }),
		gpuNode("b", 8), gpuNode("cpu", 0),
		gpuNode("cordoned", 8, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		gpuNode("tainted", 8, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
		}),
		gpuNode("full", 4), gpuPod("full", 4), gpuPod("b", 3),
	)
	nodes, skipped, err := ChooseNodes(context.Background(), cs, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Name != "a" || nodes[0].Free != 8 || nodes[1].Name != "b" || nodes[1].Free != 5 || nodes[0].Product != "NVIDIA-H200" {
		t.Errorf("nodes %+v", nodes)
	}
	// run.parallel_gpus auto weighs the load Jobs against the node's CPU (none advertised: 0).
	if len(nodes) == 2 && (nodes[0].CPU != 95.5 || nodes[1].CPU != 0) {
		t.Errorf("allocatable CPU %g and %g, want 95.5 and 0", nodes[0].CPU, nodes[1].CPU)
	}
	why := map[string]string{}
	for _, s := range skipped {
		why[s.Name] = s.Reason
	}
	for n, want := range map[string]string{"cordoned": "cordoned", "tainted": "not tolerated", "full": "no free GPU: 4 of 4"} {
		if !strings.Contains(why[n], want) {
			t.Errorf("%s skipped as %q, want %q", n, why[n], want)
		}
	}
	if _, ok := why["cpu"]; ok {
		t.Errorf("a CPU node is not a skipped GPU node: %v", why)
	}
	tols, err := ParseTolerations("nvidia.com/gpu=present:NoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	nodes, skipped, _ = ChooseNodes(context.Background(), cs, Selection{Tolerations: tols, Max: 2})
	if len(nodes) != 2 || nodes[1].Name != "b" {
		t.Errorf("with --nodes 2: %+v", nodes)
	}
	for _, s := range skipped {
		if s.Name == "tainted" && !strings.Contains(s.Reason, "past --nodes 2") {
			t.Errorf("tainted: %s", s.Reason)
		}
	}
	if _, _, err := ChooseNodes(context.Background(), cs, Selection{Selector: "pool=none"}); err == nil || !strings.Contains(err.Error(), "no GPU node") {
		t.Errorf("no match: %v", err)
	}
	if _, _, err := ChooseNodes(context.Background(), cs, Selection{Selector: "a b"}); err == nil || !strings.Contains(err.Error(), "--node-selector") {
		t.Errorf("bad selector: %v", err)
	}
}

func TestParseTolerations(t *testing.T) {
	for _, bad := range []string{"=v", "k:Sometimes"} {
		if _, err := ParseTolerations(bad); err == nil || !strings.Contains(err.Error(), "--tolerations") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	tl, err := ParseTolerations("a, b=c:NoExecute, *")
	if err != nil || len(tl) != 3 || tl[0].Operator != corev1.TolerationOpExists || tl[1].Value != "c" || tl[2].Key != "" {
		t.Errorf("%+v %v", tl, err)
	}
	if !tolerates(tl[2], corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}) || tolerates(tl[1], corev1.Taint{Key: "b", Value: "d", Effect: corev1.TaintEffectNoExecute}) {
		t.Error("toleration match")
	}
}

func TestCheckAccessNamesMissing(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = !(ra.Verb == "create" && ra.Resource == "jobs") && !(ra.Verb == "delete" && ra.Resource == "namespaces")
		return true, r, nil
	})
	err := CheckAccess(context.Background(), cs, "gpuvet-x", "gpuvet-x", Needs(true, false, false, false))
	if err == nil || !strings.Contains(err.Error(), "missing RBAC permission: delete namespaces (cluster-wide), create jobs.batch (in namespace gpuvet-x)") {
		t.Errorf("%v", err)
	}
}

func TestPodProblem(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0"}}
	if podProblem(p, nil, nil) != nil {
		t.Error("a new pod has no problem")
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}
	if pe := podProblem(p, nil, nil); pe == nil || pe.Reason != "Unschedulable" || !strings.Contains(pe.Error(), "Insufficient nvidia.com/gpu") {
		t.Errorf("%v", pe)
	}
	for _, m := range []string{"0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available",
		`0/2 nodes are available: persistentvolumeclaim "cache-kwok-gpu-0" bound to non-existent persistentvolume "". not found`} {
		p.Status.Conditions[0].Message = m
		if pe := podProblem(p, nil, nil); pe != nil {
			t.Errorf("a volume still binding is not a verdict: %v", pe)
		}
	}
	p.Status.Conditions = nil
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "engine", RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	pe := podProblem(p, func(c string, prev bool) string { return "ValueError: no KV cache\n" + c }, nil)
	if pe == nil || pe.Reason != "CrashLoopBackOff" || !strings.Contains(pe.Detail, "restarted 5 times, last exit 1") || !strings.Contains(pe.Detail, "ValueError: no KV cache") {
		t.Errorf("%v", pe)
	}
	p.Status.ContainerStatuses[0].LastTerminationState.Terminated.Reason = "OOMKilled"
	if pe := podProblem(p, nil, nil); pe == nil || pe.Reason != "OOMKilled" {
		t.Errorf("%v", pe)
	}
	p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: "engine", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"vllm/vllm-openai:v9\""}}}
	if pe := podProblem(p, nil, nil); pe == nil || pe.Reason != "ImagePullBackOff" || !strings.Contains(pe.Detail, "vllm-openai:v9") {
		t.Errorf("%v", pe)
	}
	p.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	if pe := podProblem(p, nil, nil); pe != nil {
		t.Errorf("ContainerCreating is not a problem: %v", pe)
	}
}

func TestEnginePod(t *testing.T) {
	es := EngineSpec{Kind: "vllm", Image: "vllm/vllm-openai:v0.11.0", Model: "Qwen/Qwen3-8B", TP: 2, MaxModelLen: 4096,
		GPUMemoryUtilization: 0.9, CachePVC: "cache-n1", Env: map[string]string{"VLLM_LOGGING_LEVEL": "INFO"}}
	p, err := enginePod("20260101T000000Z", "engine-0-0-0", "n1", 0, es, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	cmd := strings.Join(c.Command, " ")
	if !strings.Contains(cmd, "--host 0.0.0.0 --port 8000") || !strings.Contains(cmd, "--tensor-parallel-size 2") {
		t.Errorf("command %s", cmd)
	}
	if q := c.Resources.Limits[GPUResource]; q.Value() != 2 {
		t.Errorf("gpus %v", q)
	}
	if p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n1" {
		t.Error("not pinned to its node through the scheduler")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["HF_HUB_OFFLINE"] != "1" || env["HF_HOME"] != cacheMount || !c.VolumeMounts[0].ReadOnly || !p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly {
		t.Errorf("cache not mounted read-only offline: %v %+v", env, c.VolumeMounts)
	}
	if p.Labels[LabelRun] != "20260101T000000Z" || p.Labels[LabelManagedBy] != ManagedBy {
		t.Errorf("labels %v", p.Labels)
	}
	if _, err := enginePod("r", "e", "n", 0, EngineSpec{Kind: "generic"}, nil); err == nil {
		t.Error("generic without a command")
	}
	img, err := DefaultEngineImage("vllm", "0.11.0")
	if err != nil || img != "vllm/vllm-openai:v0.11.0" {
		t.Errorf("%s %v", img, err)
	}
	if _, err := DefaultEngineImage("generic", ""); err == nil || !strings.Contains(err.Error(), "--engine-image") {
		t.Errorf("%v", err)
	}
}

func TestNames(t *testing.T) {
	if n := Namespace("20260101T000000Z"); n != "gpuvet-20260101t000000z" {
		t.Error(n)
	}
	long := dnsName("engine", strings.Repeat("Node_", 30), "1")
	if len(long) > 63 || strings.ContainsAny(long, "_N") {
		t.Error(long)
	}
}

// A wait cut short by the run says it was interrupted; only a wait whose own timeout passed says so.
func TestWaitJobInterruptedIsNotATimeout(t *testing.T) {
	cs := fake.NewSimpleClientset(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "cache-0-0", Namespace: "ns"}})
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("SIGTERM"))
	_, err := WaitJob(ctx, cs, "ns", "cache-0-0", time.Hour, 0)
	if err == nil || !strings.Contains(err.Error(), "interrupted: SIGTERM") || strings.Contains(err.Error(), "within") {
		t.Errorf("interrupted wait: %v", err)
	}
	_, err = WaitJob(context.Background(), cs, "ns", "cache-0-0", 10*time.Millisecond, 0)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 10ms") {
		t.Errorf("timed-out wait: %v", err)
	}
	pods := fake.NewSimpleClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0", Namespace: "ns"}})
	if err := WaitPodsReady(ctx, pods, "ns", []string{"engine-0"}, time.Hour, 0); err == nil || !strings.Contains(err.Error(), "interrupted: SIGTERM") || strings.Contains(err.Error(), "ready_timeout") {
		t.Errorf("interrupted pod wait: %v", err)
	}
}

// The populate Job writes a volume that comes up root:root 0755 as uid 65532: fsGroup for CSI block
// volumes, and (kubernetes.cache_owner_init) a root init container with only CAP_CHOWN and
// CAP_FOWNER for hostPath and NFS; the hub mirror reaches it as HF_ENDPOINT; the token only through
// the Secret.
func TestPopulateJob(t *testing.T) {
	for _, init := range []bool{true, false} {
		j := gpuvetJob("r1", "cache-0-0", RoleCache, "n1", "img:1", []string{"cache", "pull", "m/x"}, 0, nil)
		withCache(j, "cache-n1", CacheAccess{Hub: "http://mirror.local:8080", TokenSecret: tokenSecret("r1"), OwnerInit: init})
		ps := j.Spec.Template.Spec
		sc := ps.SecurityContext
		if sc == nil || *sc.RunAsUser != CacheUser || *sc.RunAsGroup != CacheUser || *sc.FSGroup != CacheUser || !*sc.RunAsNonRoot ||
			*sc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Fatalf("pod securityContext %+v", sc)
		}
		c := ps.Containers[0]
		if c.SecurityContext == nil || *c.SecurityContext.AllowPrivilegeEscalation || c.SecurityContext.Capabilities.Drop[0] != "ALL" {
			t.Errorf("populate container securityContext %+v", c.SecurityContext)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		if env["HF_ENDPOINT"].Value != "http://mirror.local:8080" || env["HF_HOME"].Value != cacheMount ||
			env["HF_TOKEN"].Value != "" || env["HF_TOKEN"].ValueFrom.SecretKeyRef.Name != tokenSecret("r1") {
			t.Errorf("populate env %+v", c.Env)
		}
		if !init {
			if len(ps.InitContainers) != 0 {
				t.Errorf("cache_owner_init false: init containers %+v", ps.InitContainers)
			}
			continue
		}
		if len(ps.InitContainers) != 1 {
			t.Fatalf("init containers %+v", ps.InitContainers)
		}
		ic := ps.InitContainers[0]
		isc := ic.SecurityContext
		if ic.Image != "img:1" || strings.Join(ic.Command, " ") != GpuvetBinary+" cache own /cache --uid 65532 --gid 65532" ||
			ic.VolumeMounts[0].MountPath != cacheMount || ic.VolumeMounts[0].ReadOnly {
			t.Errorf("init container %+v", ic)
		}
		if *isc.RunAsUser != 0 || *isc.RunAsNonRoot || *isc.AllowPrivilegeEscalation || isc.Capabilities.Drop[0] != "ALL" ||
			len(isc.Capabilities.Add) != 2 || isc.Capabilities.Add[0] != "CHOWN" || isc.Capabilities.Add[1] != "FOWNER" {
			t.Errorf("init securityContext %+v", isc)
		}
	}
	// No mirror: no HF_ENDPOINT (the hub's default).
	j := gpuvetJob("r1", "cache-0-0", RoleCache, "n1", "img:1", nil, 0, nil)
	withCache(j, "c", CacheAccess{})
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "HF_ENDPOINT" || e.Name == "HF_TOKEN" {
			t.Errorf("unexpected %s", e.Name)
		}
	}
}

// The hub mirror comes from model_cache.endpoint, else HF_ENDPOINT where gpuvet runs; a bad
// HF_ENDPOINT stops the run before anything is created.
func TestPrepareHubMirror(t *testing.T) {
	cs := fake.NewClientset(gpuNode("n1", 8))
	allowAll(cs)
	cl := &Cluster{Client: cs}
	opt := Options{RunID: "r1", Image: "img", CacheSize: "off"}
	t.Setenv("HF_ENDPOINT", "http://env-mirror:8080/")
	r, err := Prepare(context.Background(), cl, config.Defaults(), opt)
	if err != nil || r.hub != "http://env-mirror:8080" {
		t.Fatalf("hub %q, %v; want HF_ENDPOINT's", r.hub, err)
	}
	opt.HubEndpoint = "https://key-mirror"
	if r, err = Prepare(context.Background(), cl, config.Defaults(), opt); err != nil || r.hub != "https://key-mirror" {
		t.Fatalf("hub %q, %v; want model_cache.endpoint's", r.hub, err)
	}
	opt.HubEndpoint = ""
	t.Setenv("HF_ENDPOINT", "https://user:pw@mirror")
	if _, err := Prepare(context.Background(), cl, config.Defaults(), opt); err == nil || !strings.Contains(err.Error(), "HF_ENDPOINT") || strings.Contains(err.Error(), "pw@") {
		t.Errorf("bad HF_ENDPOINT: %v", err)
	}
}

// A populate Job that cannot write its volume says what to do in Kubernetes terms.
func TestPopulateHint(t *testing.T) {
	err := errors.New("job cache-0-0 failed: ... mkdir /cache/hub: permission denied); make the cache folder writable or choose another with --cache-dir")
	for _, init := range []bool{true, false} {
		got := populateHint(err, init).Error()
		if !strings.Contains(got, "not writable by uid 65532") || strings.Contains(got, "kubernetes.cache_owner_init true") == init {
			t.Errorf("init %v: %s", init, got)
		}
	}
	if other := errors.New("job x failed: HTTP 404"); populateHint(other, true) != other {
		t.Error("only permission errors get the hint")
	}
}

// An init container that fails is the pod's reason (its containers never ran, so they have no log),
// and one restart reads "once".
func TestPodProblemInitContainer(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache-0-0-x"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "cache-owner", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "gpuvet", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}}
	pe := podProblem(p, func(c string, prev bool) string { return c + ": chown /cache to 65532:65532: operation not permitted" }, nil)
	if pe == nil || pe.Reason != "Failed" || !strings.Contains(pe.Detail, "init container cache-owner exit 1") || !strings.Contains(pe.Detail, "cache-owner: chown /cache") {
		t.Errorf("%v", pe)
	}
	p.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "engine", RestartCount: 1,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}
	if pe := podProblem(p, nil, nil); pe == nil || !strings.Contains(pe.Detail, "container engine restarted once") {
		t.Errorf("%v", pe)
	}
}

// A Job whose pod the API refuses (admission) fails at once with the API's reason, not at its timeout.
func TestWaitJobPodRefused(t *testing.T) {
	defer func(d time.Duration) { pollEvery = d }(pollEvery)
	pollEvery = 5 * time.Millisecond
	msg := `Error creating: pods "cache-0-0-abcde" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`
	cs := fake.NewClientset(
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "cache-0-0", Namespace: "ns"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "ns"}, Reason: "FailedCreate", Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "cache-0-0", Namespace: "ns"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e2", Namespace: "ns"}, Reason: "FailedCreate", Message: "other job",
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "load-0-0", Namespace: "ns"}})
	start := time.Now()
	_, err := WaitJob(context.Background(), cs, "ns", "cache-0-0", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), "its pod cannot be created: "+msg) || time.Since(start) > 10*time.Second {
		t.Fatalf("%v after %s", err, time.Since(start))
	}
	if h := populateHint(err, true).Error(); !strings.Contains(h, "kubernetes.cache_owner_init false") {
		t.Errorf("hint: %s", h)
	}
}

// A pod Kubernetes stopped for a reason of its own (preempted for higher-priority work, evicted)
// is a disruption, not a failure: its error carries it (results.Disrupted) whatever its phase and
// exit codes, a wait for it says so at once, and so does a pod deleted under the wait.
func TestPreemptedPodIsADisruption(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0-0-0", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler",
			Message: "default-scheduler: preempting to accommodate a higher priority pod"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "engine", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}}}}
	pe := podProblem(p, nil, nil)
	if pe == nil || !pe.Disrupted {
		t.Fatalf("podProblem %+v, want a disruption", pe)
	}
	d := results.DisruptionOf(fmt.Errorf("engine not ready: %w", pe))
	if !strings.Contains(d, "engine-0-0-0 preempted by the scheduler") || !strings.Contains(d, "higher priority pod") {
		t.Fatalf("disruption %q", d)
	}
	cs := fake.NewClientset(p)
	err := WaitPodsReady(context.Background(), cs, "ns", []string{"engine-0-0-0"}, 5*time.Second, 0)
	if results.DisruptionOf(err) == "" {
		t.Fatalf("wait: %v, want the disruption", err)
	}
	// An OOM or a crash is not one.
	p.Status.Conditions = nil
	if pe := podProblem(p, nil, nil); pe == nil || pe.Disrupted || results.DisruptionOf(pe) != "" {
		t.Fatalf("a failed pod without the condition: %+v", pe)
	}
}

// TestLongNodeNamesStayApart: two nodes whose names share their first 63 characters get different
// cache PVC names and node labels: a node's Cleanup deletes its pods by that label, and would
// otherwise delete the other node's engine and load pods mid-run (and a kept cache mount the other
// node's ReadWriteOnce PVC).
func TestLongNodeNamesStayApart(t *testing.T) {
	prefix := "gpu-h100-pool-a.rack-17.row-4.hall-2.datacenter-east.example-corp.internal-"
	a, b := prefix+"node-001", prefix+"node-002"
	if x, y := dnsName("cache", a), dnsName("cache", b); x == y || len(x) > 63 || len(y) > 63 {
		t.Errorf("dnsName: %q and %q", x, y)
	}
	if x, y := labelValue(a), labelValue(b); x == y || len(x) > 63 || len(y) > 63 {
		t.Errorf("labelValue: %q and %q", x, y)
	}
	if got := labelValue("node-1.example.com"); got != "node-1.example.com" {
		t.Errorf("a short name changed: %q", got)
	}
	if got := dnsName("cache", "node-1.example.com"); got != "cache-node-1-example-com" {
		t.Errorf("a short name changed: %q", got)
	}
}

// TestEngineArgsListenOnThePod: an engine.command written for a local run binds loopback, which a
// pod's readiness probe and load Job cannot reach: every spelling of it (--host ADDR,
// --host=ADDR; 127.0.0.1, localhost) listens on the pod's addresses instead.
func TestEngineArgsListenOnThePod(t *testing.T) {
	for _, cmd := range []string{"srv --host=127.0.0.1 --port {port}", "srv --host=localhost --port {port}", "srv --host localhost --port {port}"} {
		args, err := engineArgs(EngineSpec{Kind: "generic", Command: cmd, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(args, " "); !strings.Contains(got, "0.0.0.0") || strings.Contains(got, "127.0.0.1") || strings.Contains(got, "localhost") {
			t.Errorf("%q -> %q: want it to listen on 0.0.0.0", cmd, got)
		}
	}
}
