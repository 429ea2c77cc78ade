package k8s_test

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// small is one engine per node and no health phase: the tests below are about the cache and
// readiness, not the load.
var small = []string{"--gpu-count", "1", "--set", "health.enabled=false"}

// syncLoad loads each engine with the synchronous rung alone (a few seconds, not a 25 s sweep):
// for the tests whose subject is not the load's figures.
var syncLoad = []string{"--set", "load.profile=synchronous"}

// seen records what a run created, polled while it runs.
type seen struct {
	mu         sync.Mutex
	pvcs       map[string]corev1.PersistentVolumeAccessMode
	claims     map[string]bool // claims the engine pods mount
	cacheJobs  map[string]bool
	readyJobs  map[string]bool
	stop, done chan struct{}
}

func (e *env) watchRun(t *testing.T) *seen {
	s := &seen{pvcs: map[string]corev1.PersistentVolumeAccessMode{}, claims: map[string]bool{}, cacheJobs: map[string]bool{},
		readyJobs: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy}
	go func() {
		defer close(s.done)
		for {
			pvcs, _ := e.cs.CoreV1().PersistentVolumeClaims("").List(ctx, sel)
			pods, _ := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRole + "=" + k8s.RoleEngine})
			jobs, _ := e.cs.BatchV1().Jobs("").List(ctx, sel)
			s.mu.Lock()
			for _, p := range pvcs.Items {
				s.pvcs[p.Name] = p.Spec.AccessModes[0]
			}
			for _, p := range pods.Items {
				for _, v := range p.Spec.Volumes {
					if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly {
						s.claims[v.PersistentVolumeClaim.ClaimName] = true
					}
				}
			}
			for _, j := range jobs.Items {
				switch j.Labels[k8s.LabelRole] {
				case k8s.RoleCache:
					s.cacheJobs[j.Name] = true
				case k8s.RoleReady:
					s.readyJobs[j.Name] = true
				}
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *seen) end() { close(s.stop); <-s.done }

func keys[V any](m map[string]V) string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return strings.Join(k, ",")
}

// provisionNFS plays an NFS CSI provisioner for a StorageClass: every claim of the class gets a
// ReadWriteMany volume (kwok provisions only its own class).
func (e *env) provisionNFS(t *testing.T, class string) {
	ctx, cancel := context.WithCancel(context.Background())
	var made []string
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			l, _ := e.cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
			for _, c := range l.Items {
				if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != class || c.Spec.VolumeName != "" {
					continue
				}
				pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs-" + string(c.UID)},
					Spec: corev1.PersistentVolumeSpec{AccessModes: c.Spec.AccessModes, StorageClassName: class,
						Capacity:                      c.Spec.Resources.Requests,
						PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
						ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
						PersistentVolumeSource:        corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/cache"}}}}
				if _, err := e.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err == nil {
					mu.Lock()
					made = append(made, pv.Name)
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, n := range made {
			e.cs.CoreV1().PersistentVolumes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
}

// With model_cache.access_mode auto on a StorageClass whose provisioner shares volumes between
// nodes (NFS CSI), the run makes one ReadWriteMany PVC and one populate Job, every node's engines
// mount it read-only, and the run says which mode it chose and why.
func TestKubernetesSharedCacheReadWriteMany(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "test-nfs"}, Provisioner: "nfs.csi.k8s.io"}
	if _, err := e.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{})
	e.provisionNFS(t, sc.Name)
	e.standIn(t, nil)
	out, state := t.TempDir(), t.TempDir()
	w := e.watchRun(t)
	start := time.Now()
	// The run's own cache namespace (kubernetes.cache_namespace ""): the names checked below are the
	// run's, and no kept cache of another test's StorageClass is in the way.
	log, code := e.gpuvetEnv(t, state, []string{"GPUVET_KUBERNETES_STORAGE_CLASS=test-nfs", "GPUVET_KUBERNETES_CACHE_NAMESPACE="}, e.runArgs(out, append(small, syncLoad...)...)...)
	w.end()
	t.Logf("exit %d in %s", code, time.Since(start).Round(100*time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, log)
	}
	if !strings.Contains(log, "ReadWriteMany (model_cache.access_mode auto): StorageClass test-nfs (provisioner nfs.csi.k8s.io) is NFS CSI") {
		t.Errorf("the run does not say which cache mode it chose and why:\n%s", log)
	}
	if keys(w.pvcs) != "cache" || w.pvcs["cache"] != corev1.ReadWriteMany || keys(w.claims) != "cache" || keys(w.cacheJobs) != "cache-shared-0" {
		t.Errorf("PVCs %v, engine claims %s, cache jobs %s: want one shared ReadWriteMany PVC, one populate job", w.pvcs, keys(w.claims), keys(w.cacheJobs))
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		if h.Error != "" || !strings.Contains(h.Discovery.Note, "ReadWriteMany") {
			t.Errorf("host %s: error %q, note %q", h.Name, h.Error, h.Discovery.Note)
		}
	}
	e.assertNothingLeft(t, state)
}

// A pod that is Ready (its /health answers) but whose completions fail is reported as such, with
// the response's error, and the other node's engines still load.
func TestKubernetesReadyButCompletionFails(t *testing.T) {
	e := setup(t)
	e.standIn(t, func(k *standInKubelet) { k.badCompletion = "kwok-gpu-1" })
	out, state := t.TempDir(), t.TempDir()
	w := e.watchRun(t)
	start := time.Now()
	// ready_timeout bounds the load Job's retries of the failing completion (at most 2 minutes).
	args := append(append([]string{"--set", "engine.ready_timeout=45s"}, small...), syncLoad...)
	log, code := e.gpuvetEnv(t, state, []string{"GPUVET_MODEL_CACHE=off"}, e.runArgs(out, args...)...)
	w.end()
	t.Logf("exit %d in %s", code, time.Since(start).Round(100*time.Millisecond))
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, log)
	}
	if len(w.pvcs) != 0 || len(w.readyJobs) != 0 { // the load Job checks the completion: no Job of its own
		t.Errorf("PVCs %v (model_cache: off), ready jobs %s", w.pvcs, keys(w.readyJobs))
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		ep := h.Models[0].Endpoints[0]
		if h.Name == "kwok-gpu-1" {
			t.Logf("%s: %s", h.Name, ep.Error)
			if !strings.Contains(h.Error+ep.Error, "Ready, but a real completion failed") || !strings.Contains(ep.Error, "HTTP 500") ||
				!strings.Contains(ep.Error, "simulated engine error") || ep.Load != nil || ep.ErrorLayer != results.LayerEngine {
				t.Errorf("node %s: host error %q, endpoint error %q (layer %q)", h.Name, h.Error, ep.Error, ep.ErrorLayer)
			}
			continue
		}
		if h.Error != "" || ep.Error != "" || ep.Load == nil {
			t.Errorf("healthy node %s: host error %q, endpoint error %q", h.Name, h.Error, ep.Error)
		}
	}
	e.assertNothingLeft(t, state)
}
