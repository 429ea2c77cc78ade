package k8s

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Waiting costs the same few requests however long a Job or its pods take: the waits read the
// objects from one watch per namespace, never a request per poll. Many waits at once (a wave of
// nodes) share that watch. (The waits polled before: a Job get and a pod list every 500 ms each.)
func TestWaitsWatchInsteadOfPolling(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	const jobs = 10
	for i := range jobs {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%d", i), Namespace: "ns"}}
		if _, err := cs.BatchV1().Jobs("ns").Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	engine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, engine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(cs.Actions())
	var wg sync.WaitGroup
	errs := make(chan error, jobs+1)
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := WaitJob(ctx, cs, "ns", fmt.Sprintf("load-%d", i), time.Minute, 0)
			errs <- err
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs <- WaitPodsReady(ctx, cs, "ns", []string{"engine-0"}, time.Minute, 0) }()
	time.Sleep(3 * time.Second) // the Jobs and the engine take a while: a poll would have asked ~6 times each
	for i := range jobs {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%d-x", i), Namespace: "ns", Labels: map[string]string{jobNameLabel: fmt.Sprintf("load-%d", i)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gpuvet"}}}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
		if _, err := cs.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	engine.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods("ns").UpdateStatus(ctx, engine, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Our own creates above are not the waits'; what is left: the informers' lists and watches
	// (pods, Jobs, and the refusal events once), one events probe, one log read per Job.
	byVerb := map[string]int{}
	for _, a := range cs.Actions()[before:] {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			continue
		}
		byVerb[a.GetVerb()+" "+a.GetResource().Resource+subresource(a.GetSubresource())]++
	}
	n := 0
	for _, c := range byVerb {
		n += c
	}
	if n > jobs+8 {
		t.Errorf("%d requests for %d Jobs and one pod (want about one per Job, its log, and a few for the watches): %v", n, jobs, byVerb)
	}
	if byVerb["get pods/log"] != jobs {
		t.Errorf("log reads: %v", byVerb)
	}
}

func subresource(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

// The client counts every request it sends, client-go's retries included: a 429 with Retry-After
// (what the API server's priority and fairness answer) is retried by client-go itself after the
// server's delay, so gpuvet adds no retry of its own on top; one without the header, or past
// client-go's retries, is transient to gpuvet's waits, which back off.
func TestRequestsCountedAndThrottlingRetried(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":"too many requests"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}`)
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \""+srv.URL+"\"}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600)
	cl, err := ConnectWith(kc, "", Limits{QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := cl.Client.CoreV1().Namespaces().Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
		t.Fatalf("a throttled request was not retried to success: %v", err)
	}
	if calls.Load() != 3 || cl.Requests.Load() != 3 {
		t.Errorf("server saw %d requests, the client counted %d; want 3 each (two 429s, then the answer)", calls.Load(), cl.Requests.Load())
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("retried after %s: client-go waits the server's Retry-After (1 s) each time", d)
	}
	if cl.Config.QPS != 1000 || cl.Config.Burst != 1000 {
		t.Errorf("limits %v/%d", cl.Config.QPS, cl.Config.Burst)
	}
	if d, err := ConnectWith(kc, "", Limits{}); err != nil || d.Config.QPS != float32(DefaultLimits().QPS) || d.Config.Burst != DefaultLimits().Burst {
		t.Errorf("no limits given: %v %v", d.Config.QPS, err)
	}
	if !transient(fmt.Errorf("wrapped: %w", apierrors.NewTooManyRequests("slow down", 1))) {
		t.Error("a 429 past client-go's retries is not transient to the waits")
	}
	// The run's own count lands in summary.json.
	s := &results.Summary{}
	(&Fleet{Cluster: cl}).Finish(s)
	if s.Fleet == nil || s.Fleet.APIRequests != 3 {
		t.Errorf("summary fleet %+v", s.Fleet)
	}
}
