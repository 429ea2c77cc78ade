package kwokplayer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/k8s/kwokplayer"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
)

func recorded(t *testing.T) *kwokplayer.Recordings {
	t.Helper()
	r, err := kwokplayer.Recorded()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The recorded results are real and complete: a health phase on 8 GPUs that passed, a completion
// with tokens, a load with a measured sweep.
func TestRecordedResultsAreReal(t *testing.T) {
	r := recorded(t)
	b, err := k8s.ExtractResult(must(r.HealthFor("n1")))
	if err != nil {
		t.Fatal(err)
	}
	var h results.Health
	if err := json.Unmarshal(b, &h); err != nil || len(h.GPUs) != 8 || h.Status != results.StatusOK {
		t.Fatalf("health: %v, %d GPUs, status %s", err, len(h.GPUs), h.Status)
	}
	other := healthOf(t, r, "n2")
	if h.GPUs[0].GPU.UUID == other.GPUs[0].GPU.UUID || h.GPUs[0].GPU.UUID == h.GPUs[1].GPU.UUID {
		t.Errorf("GPU UUIDs not per node and GPU: %s %s %s", h.GPUs[0].GPU.UUID, h.GPUs[1].GPU.UUID, other.GPUs[0].GPU.UUID)
	}
	s := loadOf(t, r, "http://10.1.2.3:8000", 1)
	ep := s.Hosts[0].Models[0].Endpoints[0]
	if ep.URL != "http://10.1.2.3:8000" || ep.Load.PeakOutputTokS <= 0 || len(ep.Load.Runs) < 2 {
		t.Errorf("load: url %s, peak %v, %d runs", ep.URL, ep.Load.PeakOutputTokS, len(ep.Load.Runs))
	}
}

// A load played f times slower has every latency × f and every rate ÷ f, and nothing else changed.
func TestLoadScaledPerNode(t *testing.T) {
	r := recorded(t)
	a, b := loadOf(t, r, "u", 1), loadOf(t, r, "u", 1.15)
	la, lb := a.Hosts[0].Models[0].Endpoints[0].Load, b.Hosts[0].Models[0].Endpoints[0].Load
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	near("peak output tok/s", lb.PeakOutputTokS, la.PeakOutputTokS/1.15)
	near("sustained req/s", lb.SustainedReqS, la.SustainedReqS/1.15)
	for i := range la.Runs {
		ra, rb := la.Runs[i], lb.Runs[i]
		near(ra.Kind+" TTFT p95", rb.TTFT.P95, ra.TTFT.P95*1.15)
		near(ra.Kind+" TPOT p50", rb.TPOT.P50, ra.TPOT.P50*1.15)
		near(ra.Kind+" ITL p95", rb.ITL.P95, ra.ITL.P95*1.15)
		near(ra.Kind+" output tok/s", rb.OutputTokS, ra.OutputTokS/1.15)
		if ra.Requests != rb.Requests || ra.WindowSeconds != rb.WindowSeconds || ra.ClientLag != rb.ClientLag {
			t.Errorf("%s: counts, window or client lag changed", ra.Kind)
		}
		if ra.CI != nil && ra.CI.TPOTP50 != nil {
			near(ra.Kind+" TPOT p50 CI", rb.CI.TPOTP50.Hi, ra.CI.TPOTP50.Hi*1.15)
		}
	}
}

// A fleet of played nodes, merged and judged as gpuvet judges a Kubernetes run, flags the 15 %
// slower node node to node and no other: the recording's figures are tight enough, and the
// jitter small enough, that the injected straggler is the only one named.
func TestPlayedFleetFlagsOnlyTheStraggler(t *testing.T) {
	r := recorded(t)
	plan, err := config.Load(config.Options{Sets: []string{"backend=kubernetes", "kubernetes.image=x", "models=[Qwen/Qwen3-8B]", "engine.kind=generic", "engine.command=gpuvet sim --model {model} --port {port}"}})
	if err != nil {
		t.Fatal(err)
	}
	const nodes, straggler = 12, "node-5"
	var outs []fleet.Outcome
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		f := 1.0
		if name == straggler {
			f = 1.15
		}
		h := healthOf(t, r, name)
		host := results.Host{Name: name, Health: &h, Discovery: results.Discovery{Source: "kubernetes"}}
		m := results.Model{Model: "Qwen/Qwen3-8B", Engine: results.EngineInfo{Kind: "generic", TP: 1}}
		var meta results.Meta
		for g := range 8 {
			host.Discovery.GPUs = append(host.Discovery.GPUs, results.GPUInfo{Index: g, Name: "NVIDIA H200", UUID: h.GPUs[g].GPU.UUID, NUMANode: -1})
			url := fmt.Sprintf("http://10.0.%d.%d:8000", i, g)
			s := loadOf(t, r, url, f*(1+0.005*float64(g%3-1)))
			ep := s.Hosts[0].Models[0].Endpoints[0]
			ep.GPUs, ep.GPUName, ep.URL = []int{g}, "NVIDIA H200", url
			m.Endpoints = append(m.Endpoints, ep)
			meta = s.Meta
		}
		host.Models = []results.Model{m}
		outs = append(outs, fleet.Outcome{Host: name, Summary: &results.Summary{SchemaVersion: results.SchemaVersion, Meta: meta, Hosts: []results.Host{host}}})
	}
	base := pipeline.NewSummary(plan, "r1", time.Now(), "test")
	base.Status = results.StatusOK
	s := fleet.Merge(base, outs, nil, 4)
	jc := judge.FromPlan(plan, nil)
	judge.CompareNodes(s, jc.LLMGuardsFrom(), jc.GEMMGuardsFrom())
	if err := judge.Judge(s, plan); err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		want := results.StatusOK
		if h.Name == straggler {
			want = results.StatusFlag
		}
		if h.Status != want {
			var why []string
			for _, f := range h.Flags {
				why = append(why, f.Check+": "+f.Reason)
			}
			t.Errorf("%s: %s, want %s: %s", h.Name, h.Status, want, strings.Join(why, "; "))
		}
	}
}

// The player ends each pod as its role's real one ends: engines Ready (but not the never-ready
// node's), Jobs Succeeded with the recorded result for their node and URL (each failing node's
// health Job Failed, without a result; the others' Succeeded), every log through a kwok Logs object.
func TestPlayerPlaysPodsByRole(t *testing.T) {
	cs := fake.NewClientset()
	logsGVR := schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{logsGVR: "LogsList"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := kwokplayer.New(kwokplayer.Options{Client: cs, Dynamic: dyn, LogDir: t.TempDir(), Straggler: "slow", Slowdown: 0.15,
		FailJobs: []string{"broken", "broken-too"}, NeverReady: "stuck", Errorf: func(f string, a ...any) { t.Errorf(f, a...) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{
		pod("engine-0", "ok", k8s.RoleEngine, nil), pod("engine-1", "stuck", k8s.RoleEngine, nil),
		pod("health-0", "ok", k8s.RoleHealth, nil), pod("health-1", "broken", k8s.RoleHealth, nil),
		pod("health-2", "broken-too", k8s.RoleHealth, nil), pod("health-3", "stuck", k8s.RoleHealth, nil),
		pod("ready-0", "ok", k8s.RoleReady, []string{"probe", "--url", "http://10.0.0.1:8000", "--url=http://10.0.0.2:8000"}),
		pod("load-0", "slow", k8s.RoleLoad, []string{"run", "--backend", "endpoint", "--url", "http://10.0.0.9:8000"}),
		pod("cache-0", "ok", k8s.RoleCache, nil),
	}
	for _, pd := range pods {
		if _, err := cs.CoreV1().Pods("ns").Create(ctx, pd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"engine-0": "Ready", "health-0": "Succeeded", "health-1": "Failed", "health-2": "Failed", "health-3": "Succeeded", "ready-0": "Succeeded", "load-0": "Succeeded", "cache-0": "Succeeded"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]string{}
		for name := range want {
			cur, _ := cs.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
			got[name] = state(cur)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(3 * kwokplayer.DefaultPace.EngineReady / 2) // the never-ready node's engine had its chance
	if cur, _ := cs.CoreV1().Pods("ns").Get(ctx, "engine-1", metav1.GetOptions{}); state(cur) != "Running" {
		t.Errorf("the never-ready node's engine is %s", state(cur))
	}
	// Each Job's log is a kwok Logs object pointing at a file with the played result.
	logOf := func(name string) []byte {
		o, err := dyn.Resource(logsGVR).Namespace("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Logs %s: %v", name, err)
		}
		l, _, _ := unstructured.NestedSlice(o.Object, "spec", "logs")
		f := l[0].(map[string]any)["logsFile"].(string)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var checks []k8s.CompletionCheck
	if err := json.Unmarshal(must(k8s.ExtractResult(logOf("ready-0"))), &checks); err != nil || len(checks) != 2 || checks[1].URL != "http://10.0.0.2:8000" || checks[0].Tokens < 1 {
		t.Errorf("completion check: %v %+v", err, checks)
	}
	s, err := results.Parse(must(k8s.ExtractResult(logOf("load-0"))))
	if err != nil || s.Hosts[0].Models[0].Endpoints[0].URL != "http://10.0.0.9:8000" {
		t.Errorf("load result: %v", err)
	}
	// A failing node's health Job prints a result whose GPU 0 computed wrong answers (evidence
	// about a GPU, the judge's failed), as `gpuvet health` does before it exits 1.
	for _, name := range []string{"health-1", "health-2"} {
		var h results.Health
		if err := json.Unmarshal(must(k8s.ExtractResult(logOf(name))), &h); err != nil || len(h.GPUs) == 0 || h.GPUs[0].Status != results.StatusFailed ||
			len(h.GPUs[0].Flags) == 0 || !h.GPUs[0].Flags[len(h.GPUs[0].Flags)-1].Fails || h.GPUs[0].Flags[len(h.GPUs[0].Flags)-1].Layer != results.LayerGPU {
			t.Errorf("the failing health Job %s: %v %+v", name, err, h.GPUs)
		}
	}
	if _, err := k8s.ExtractResult(logOf("health-3")); err != nil {
		t.Errorf("health-3 (a node not failing its Job): %v", err)
	}
	if n := p.Played(); n[k8s.RoleEngine] != 1 || n[k8s.RoleHealth] != 4 || n[k8s.RoleLoad] != 1 || n[k8s.RoleReady] != 1 || n[k8s.RoleCache] != 1 {
		t.Errorf("played %v", n)
	}
}

func pod(name, node, role string, args []string) *corev1.Pod {
	l := map[string]string{k8s.LabelManagedBy: k8s.ManagedBy, k8s.LabelRole: role, k8s.LabelRun: "r1"}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: l, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Command: []string{k8s.GpuvetBinary}, Args: args}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}}}
}

func state(p *corev1.Pod) string {
	if p == nil {
		return "gone"
	}
	if p.Status.Phase != corev1.PodRunning {
		return string(p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	return "Running"
}

func healthOf(t *testing.T, r *kwokplayer.Recordings, node string) results.Health {
	t.Helper()
	var h results.Health
	if err := json.Unmarshal(must(k8s.ExtractResult(must(r.HealthFor(node)))), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

func loadOf(t *testing.T, r *kwokplayer.Recordings, url string, f float64) *results.Summary {
	t.Helper()
	s, err := results.Parse(must(k8s.ExtractResult(must(r.LoadFor(url, f)))))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
