// Package kwokplayer plays gpuvet's pods on kwok's fake GPU nodes, fast enough for a thousand of
// them: kwok runs no container, so something must give each pod the end a real node would. A pod
// is played by its role label (gpuvet.io/role) and node, never by its command line:
//   - an engine pod becomes Ready after a while (its readiness probe's answer);
//   - a Job pod (health, completion check, load, cache populate) gets the log a real one printed
//     (recorded from the real in-pod command: testdata/README.md), its result scaled for the
//     node, then ends Succeeded (or Failed);
//   - injected cases: a straggler node serving Slowdown slower, nodes whose health Job finds GPU 0
//     computing wrong answers (exit 1: evidence about a GPU; one node, or enough to trip the
//     circuit breaker), a node whose engine pods never become Ready.
//
// No process runs per pod: a played pod costs a few API requests and a file, which kwok serves as
// its log through its Logs objects (kwok must run with --enable-crds=Logs: scripts/k8s-test-env.sh).
package kwokplayer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuvet/gpuvet/internal/k8s"
)

// Pace is how long each role takes on a node of factor 1 (a straggler's serving roles take
// longer by its factor). Zero: at once.
type Pace struct {
	Cache, Health, EngineReady, ReadyCheck, Load time.Duration
}

// DefaultPace is a node of a few seconds: long enough that nodes overlap as on a real cluster,
// short enough that a thousand of them fit in minutes.
var DefaultPace = Pace{Cache: 200 * time.Millisecond, Health: time.Second, EngineReady: time.Second, ReadyCheck: 200 * time.Millisecond, Load: 2 * time.Second}

// Options configure a Player.
type Options struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// LogDir holds the played pods' log files; kwok reads them, so it must be on kwok's machine.
	LogDir string
	// Recorded are the in-pod outputs played back (nil: the recorded testdata, Recorded()).
	Recorded *Recordings
	Pace     Pace
	// Straggler's engines serve Slowdown slower (0.15: 15 % more latency, 15 % less throughput).
	Straggler string
	Slowdown  float64
	// FailJobs' health Job pods find GPU 0 computing wrong answers and exit 1 with that result.
	FailJobs []string
	// NeverReady's engine pods never become Ready.
	NeverReady string
	// Jitter spreads every node's figures by up to ± this fraction (deterministic per node and
	// GPU), so that healthy nodes differ a little, as real ones do.
	Jitter float64
	// Errorf reports what the player could not do (nil: dropped).
	Errorf func(format string, a ...any)
}

// Player serves gpuvet's pods on kwok nodes until its context ends.
type Player struct {
	o       Options
	pods    cache.SharedIndexInformer
	mu      sync.Mutex
	handled map[types.UID]bool
	played  map[string]*atomic.Int64 // by role
}

var logsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// New makes a Player; Run starts it.
func New(o Options) (*Player, error) {
	if o.Client == nil || o.Dynamic == nil || o.LogDir == "" {
		return nil, fmt.Errorf("kwokplayer: Client, Dynamic and LogDir are required")
	}
	if o.Recorded == nil {
		r, err := Recorded()
		if err != nil {
			return nil, err
		}
		o.Recorded = r
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, err
	}
	p := &Player{o: o, handled: map[types.UID]bool{}, played: map[string]*atomic.Int64{}}
	for _, r := range []string{k8s.RoleEngine, k8s.RoleCache, k8s.RoleHealth, k8s.RoleReady, k8s.RoleLoad} {
		p.played[r] = &atomic.Int64{}
	}
	f := informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = k8s.LabelManagedBy + "=" + k8s.ManagedBy
	}))
	p.pods = f.Core().V1().Pods().Informer()
	return p, nil
}

// Played is how many pods of each role were played so far.
func (p *Player) Played() map[string]int64 {
	out := map[string]int64{}
	for r, n := range p.played {
		out[r] = n.Load()
	}
	return out
}

// Run plays pods until ctx ends; it returns once the pod watch has synced (the player then runs
// in the background).
func (p *Player) Run(ctx context.Context) error {
	_, err := p.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.consider(ctx, o) },
		UpdateFunc: func(_, o any) { p.consider(ctx, o) },
	})
	if err != nil {
		return err
	}
	go p.pods.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.pods.HasSynced) {
		return fmt.Errorf("kwokplayer: the pod watch did not sync: %w", ctx.Err())
	}
	return nil
}

// consider plays a pod once kwok has it running on a node with an address.
func (p *Player) consider(ctx context.Context, o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || len(pod.Spec.Containers) == 0 {
		return
	}
	p.mu.Lock()
	if p.handled[pod.UID] {
		p.mu.Unlock()
		return
	}
	p.handled[pod.UID] = true
	p.mu.Unlock()
	go p.play(ctx, pod.DeepCopy())
}

func (p *Player) errorf(format string, a ...any) {
	if p.o.Errorf != nil {
		p.o.Errorf(format, a...)
	}
}

// factor is how much slower the node serves than the recording (1: as recorded), with its jitter.
func (p *Player) factor(node, within string) float64 {
	f := 1.0
	if node == p.o.Straggler {
		f += p.o.Slowdown
	}
	return f * (1 + p.o.Jitter*spread(node, within))
}

func (p *Player) play(ctx context.Context, pod *corev1.Pod) {
	node, role := pod.Spec.NodeName, pod.Labels[k8s.LabelRole]
	rec := p.o.Recorded
	var log []byte
	var err error
	code := 0
	switch role {
	case k8s.RoleEngine:
		if node == p.o.NeverReady {
			return // Running, never Ready: gpuvet's wait ends at engine.ready_timeout
		}
		wait(ctx, scaled(p.o.Pace.EngineReady, p.factor(node, "")))
		err = p.setReady(ctx, pod)
	case k8s.RoleCache:
		wait(ctx, p.o.Pace.Cache)
		log = rec.Cache
	case k8s.RoleHealth:
		wait(ctx, p.o.Pace.Health)
		fail := slices.Contains(p.o.FailJobs, node) // its GPU 0 computes wrong answers: exit 1
		if fail {
			code = 1
		}
		log, err = rec.healthLog(node, fail)
	case k8s.RoleReady:
		urls, f := p.urls(pod), p.factor(node, "")
		wait(ctx, scaled(p.o.Pace.ReadyCheck, f))
		log, err = rec.ReadyFor(urls, f)
	case k8s.RoleLoad:
		url := first(argValues(pod, "--url"))
		f := p.factor(node, url)
		wait(ctx, scaled(p.o.Pace.Load, f))
		log, err = rec.LoadFor(url, f)
	default:
		return // not a role this player knows (a Dynamo frontend): left to kwok
	}
	if err == nil && role != k8s.RoleEngine {
		err = p.complete(ctx, pod, log, code)
	}
	if err != nil {
		if !p.gone(ctx, pod) {
			p.errorf("%s pod %s/%s on %s: %v", role, pod.Namespace, pod.Name, node, err)
		}
		return
	}
	p.played[role].Add(1)
}

// urls are the servers a completion-check pod asks: its --url arguments (`gpuvet probe`'s
// interface), else the addresses of its node's engine pods of the same run.
func (p *Player) urls(pod *corev1.Pod) []string {
	if u := argValues(pod, "--url"); len(u) > 0 {
		return u
	}
	var out []string
	for _, o := range p.pods.GetStore().List() {
		e, ok := o.(*corev1.Pod)
		if ok && e.Labels[k8s.LabelRole] == k8s.RoleEngine && e.Spec.NodeName == pod.Spec.NodeName &&
			e.Labels[k8s.LabelRun] == pod.Labels[k8s.LabelRun] && e.DeletionTimestamp == nil && e.Status.PodIP != "" {
			out = append(out, fmt.Sprintf("http://%s:%d", e.Status.PodIP, k8s.EnginePort))
		}
	}
	return out
}

// argValues are the values of a flag in the pod's first container's command line (--flag V or
// --flag=V).
func argValues(pod *corev1.Pod, flag string) []string {
	c := pod.Spec.Containers[0]
	a := append(append([]string{}, c.Command...), c.Args...)
	var out []string
	for i := 0; i < len(a); i++ {
		switch {
		case a[i] == flag && i+1 < len(a):
			out = append(out, a[i+1])
			i++
		case strings.HasPrefix(a[i], flag+"="):
			out = append(out, strings.TrimPrefix(a[i], flag+"="))
		}
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func scaled(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// gone reports whether the pod was deleted meanwhile (its run ended, or was cleaned).
func (p *Player) gone(ctx context.Context, pod *corev1.Pod) bool {
	if ctx.Err() != nil {
		return true
	}
	cur, err := p.o.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && (cur.DeletionTimestamp != nil || cur.UID != pod.UID)) {
		return true
	}
	ns, err := p.o.Client.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)
}

// complete publishes text as the pod's log, then ends the pod with the exit code.
func (p *Player) complete(ctx context.Context, pod *corev1.Pod, text []byte, code int) error {
	if err := p.setLogs(ctx, pod, text); err != nil {
		return err
	}
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	return p.patchStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = phase
		now := metav1.Now()
		for i := range st.ContainerStatuses {
			st.ContainerStatuses[i].Ready = false
			st.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, FinishedAt: now}}
		}
		setReadyConditions(st, corev1.ConditionFalse)
	})
}

// setReady is the readiness probe's success.
func (p *Player) setReady(ctx context.Context, pod *corev1.Pod) error {
	return p.patchStatus(ctx, pod, func(st *corev1.PodStatus) {
		for i := range st.ContainerStatuses {
			st.ContainerStatuses[i].Ready = true
		}
		setReadyConditions(st, corev1.ConditionTrue)
	})
}

func setReadyConditions(st *corev1.PodStatus, v corev1.ConditionStatus) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
			st.Conditions[i].Status = v
		}
	}
}

// patchStatus edits the pod's status from the watch's copy, reading it again only on a conflict.
func (p *Player) patchStatus(ctx context.Context, pod *corev1.Pod, edit func(*corev1.PodStatus)) error {
	cur := pod
	if o, ok, _ := p.pods.GetStore().Get(pod); ok {
		cur = o.(*corev1.Pod).DeepCopy()
	}
	var err error
	for i := 0; i < 10 && ctx.Err() == nil; i++ {
		edit(&cur.Status)
		if _, err = p.o.Client.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		wait(ctx, time.Duration(i+1)*50*time.Millisecond)
		if cur, err = p.o.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			cur = pod.DeepCopy()
		}
	}
	return fmt.Errorf("status not updated: %v", err)
}

// setLogs points the pod's log at a file of CRI-format lines holding text, and waits until kwok
// serves it (kwok reads its Logs objects through an informer of its own).
func (p *Player) setLogs(ctx context.Context, pod *corev1.Pod, text []byte) error {
	var b strings.Builder
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for _, l := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		b.WriteString(ts + " stdout F " + l + "\n")
	}
	dir := filepath.Join(p.o.LogDir, pod.Namespace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f := filepath.Join(dir, pod.Name+".log")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": pod.Name, "namespace": pod.Namespace},
		"spec":     map[string]any{"logs": []any{map[string]any{"containers": []any{pod.Spec.Containers[0].Name}, "logsFile": f, "previousLogsFile": f}}},
	}}
	logs := p.o.Dynamic.Resource(logsGVR).Namespace(pod.Namespace)
	if _, err := logs.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kwok Logs object: %w", err)
	}
	one := int64(1)
	var err error
	// Twice on the busy 2-core machine kwok never served two pods' logs, each asked for a minute,
	// as if its informer had missed their Logs objects: one made again is a new event for it.
	remade := time.Now()
	for d, end := 20*time.Millisecond, time.Now().Add(logsWait); ctx.Err() == nil && time.Now().Before(end); d = min(2*d, time.Second) {
		var got []byte
		got, err = p.o.Client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{LimitBytes: &one}).DoRaw(ctx)
		if err == nil && len(got) > 0 {
			return nil
		}
		if apierrors.IsNotFound(err) {
			return err
		}
		if time.Since(remade) > logsRemake {
			remade = time.Now()
			if derr := logs.Delete(ctx, pod.Name, metav1.DeleteOptions{}); derr == nil || apierrors.IsNotFound(derr) {
				_, _ = logs.Create(ctx, obj, metav1.CreateOptions{}) // Create leaves obj as it was: no resourceVersion
			}
		}
		wait(ctx, d)
	}
	return fmt.Errorf("kwok does not serve the log %s after its Logs object was made, made again every %s (%v)", logsWait, logsRemake, err)
}

// logsWait bounds how long a played pod waits for kwok to serve its log; logsRemake is how long
// before its Logs object is made again.
const (
	logsWait   = 3 * time.Minute
	logsRemake = 20 * time.Second
)
