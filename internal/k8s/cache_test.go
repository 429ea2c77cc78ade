package k8s

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
)

func class(name, provisioner string, def bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}, Provisioner: provisioner}
	if def {
		sc.Annotations[AnnotationDefaultClass] = "true"
	}
	return sc
}

func TestChooseAccess(t *testing.T) {
	for _, tt := range []struct {
		mode, provisioner string
		want              corev1.PersistentVolumeAccessMode
		why               string
	}{
		{config.AccessAuto, "nfs.csi.k8s.io", corev1.ReadWriteMany, "NFS CSI, known to share a volume between nodes, so one PVC and one download serve all 2 node(s)"},
		{config.AccessAuto, "rook-ceph.cephfs.csi.ceph.com", corev1.ReadWriteMany, "CephFS CSI (Rook)"},
		{config.AccessAuto, "efs.csi.aws.com", corev1.ReadWriteMany, "Amazon EFS"},
		{config.AccessAuto, "ebs.csi.aws.com", corev1.ReadWriteOnce, "not known to support ReadWriteMany; set model_cache.access_mode ReadWriteMany if it does"},
		{config.AccessAuto, "rook-ceph.rbd.csi.ceph.com", corev1.ReadWriteOnce, "not known"},
		{config.AccessRWO, "nfs.csi.k8s.io", corev1.ReadWriteOnce, "ReadWriteOnce as model_cache.access_mode asks"},
		{config.AccessRWX, "kwok.x-k8s.io/volume", corev1.ReadWriteMany, "does not know to support it: a PVC it cannot provision stays Pending"},
		{config.AccessRWX, "file.csi.azure.com", corev1.ReadWriteMany, "Azure Files CSI"},
	} {
		got, why := chooseAccess(tt.mode, class("sc", tt.provisioner, true), 2)
		if got != tt.want || !strings.Contains(why, tt.why) || !strings.Contains(why, "StorageClass sc (provisioner "+tt.provisioner+")") {
			t.Errorf("%s on %s: %s, %q; want %s, %q", tt.mode, tt.provisioner, got, why, tt.want, tt.why)
		}
	}
}

// allowAll answers every SelfSubjectAccessReview with yes.
func allowAll(cs *fake.Clientset) {
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		r.Status.Allowed = true
		return true, r, nil
	})
}

// Prepare picks the cache's class and access mode, and says why, before anything is created.
func TestPrepareCacheMode(t *testing.T) {
	for _, tt := range []struct {
		classes      []*storagev1.StorageClass
		size, access string
		class        string
		want         corev1.PersistentVolumeAccessMode
		note, err    string
	}{
		{[]*storagev1.StorageClass{class("nfs", "nfs.csi.k8s.io", true)}, "10Gi", "auto", "nfs", corev1.ReadWriteMany, "model cache 10Gi: ReadWriteMany (model_cache.access_mode auto)", ""},
		{[]*storagev1.StorageClass{class("gp3", "ebs.csi.aws.com", true), class("nfs", "nfs.csi.k8s.io", false)}, "10Gi", "auto", "gp3", corev1.ReadWriteOnce, "ReadWriteOnce, one PVC per node", ""},
		{[]*storagev1.StorageClass{class("nfs", "nfs.csi.k8s.io", true)}, "10Gi", "ReadWriteOnce", "nfs", corev1.ReadWriteOnce, "as model_cache.access_mode asks", ""},
		{[]*storagev1.StorageClass{class("gp3", "ebs.csi.aws.com", false)}, "10Gi", "auto", "", "", "", "name one with kubernetes.storage_class (--storage-class), or disable the cache PVC with model_cache.size off"},
		{nil, "off", "auto", "", "", "model cache: none (model_cache.size off)", ""},
		{[]*storagev1.StorageClass{class("gp3", "ebs.csi.aws.com", true)}, "-3Gi", "auto", "", "", "", "model_cache.size (--cache-size)"},
	} {
		objs := []runtime.Object{gpuNode("a", 8), gpuNode("b", 8)}
		for _, c := range tt.classes {
			objs = append(objs, c)
		}
		cs := fake.NewClientset(objs...)
		allowAll(cs)
		r, err := Prepare(context.Background(), &Cluster{Client: cs}, config.Defaults(),
			Options{RunID: "r1", Image: "img", CacheSize: tt.size, CacheAccess: tt.access})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s/%s: error %v, want %q", tt.size, tt.access, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.class != tt.class || r.access != tt.want || !strings.Contains(r.CacheNote(), tt.note) {
			t.Errorf("%s/%s: class %q access %q note %q", tt.size, tt.access, r.class, r.access, r.CacheNote())
		}
		for _, a := range cs.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource != "selfsubjectaccessreviews" {
				t.Errorf("Prepare created %s", a.GetResource().Resource)
			}
		}
	}
}

// completeJobs plays the Job controller and kubelet of the fake clientset: every Job gets a pod
// that has Succeeded.
func completeJobs(ctx context.Context, cs kubernetes.Interface, ns string) {
	done := map[string]bool{}
	for ctx.Err() == nil {
		l, _ := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		for _, j := range l.Items {
			if done[j.Name] {
				continue
			}
			done[j.Name] = true
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x", Namespace: ns, Labels: map[string]string{"batch.kubernetes.io/job-name": j.Name}},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
			cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With ReadWriteMany, one PVC and one populate Job per model serve every node, however many ask
// at once; with ReadWriteOnce each node gets its own, pinned to it.
func TestCacheSharedOrPerNode(t *testing.T) {
	defer func(d time.Duration) { pollEvery = d }(pollEvery)
	pollEvery = 5 * time.Millisecond
	for _, mode := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce} {
		cs := fake.NewClientset()
		man, err := fleet.NewManifest(t.TempDir(), "kubernetes", "r1", nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Defaults()
		cfg.Models = []string{"m/one", "m/two"}
		r := &Run{cl: &Cluster{Client: cs}, cfg: cfg, opt: Options{RunID: "r1", Image: "img"}, ns: "gpuvet-r1", cacheNS: "gpuvet-r1", man: man,
			class: "sc", access: mode}
		ctx, cancel := context.WithCancel(context.Background())
		go completeJobs(ctx, cs, r.ns)
		hosts := []*nodeHost{{r: r, node: Node{Name: "a"}, index: 0}, {r: r, node: Node{Name: "b"}, index: 1}, {r: r, node: Node{Name: "c"}, index: 2}}
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.provisionCache(ctx); err != nil {
					t.Errorf("%s: %v", h.node.Name, err)
				}
			}()
		}
		wg.Wait()
		cancel()
		pvcs, _ := cs.CoreV1().PersistentVolumeClaims(r.ns).List(context.Background(), metav1.ListOptions{})
		jobs, _ := cs.BatchV1().Jobs(r.ns).List(context.Background(), metav1.ListOptions{})
		if mode == corev1.ReadWriteMany {
			if len(pvcs.Items) != 1 || pvcs.Items[0].Spec.AccessModes[0] != corev1.ReadWriteMany || len(jobs.Items) != 2 {
				t.Fatalf("RWX: %d PVCs, %d jobs; want 1 shared PVC and one job per model", len(pvcs.Items), len(jobs.Items))
			}
			for _, j := range jobs.Items {
				if j.Spec.Template.Spec.Affinity != nil {
					t.Errorf("shared populate job %s pinned to a node", j.Name)
				}
			}
			for _, h := range hosts {
				if h.pvc != "cache" {
					t.Errorf("%s mounts %q", h.node.Name, h.pvc)
				}
			}
			continue
		}
		if len(pvcs.Items) != 3 || len(jobs.Items) != 6 {
			t.Fatalf("RWO: %d PVCs, %d jobs; want one PVC per node and one job per node and model", len(pvcs.Items), len(jobs.Items))
		}
		for _, p := range pvcs.Items {
			if p.Spec.AccessModes[0] != corev1.ReadWriteOnce {
				t.Errorf("PVC %s %v", p.Name, p.Spec.AccessModes)
			}
		}
		for _, h := range hosts {
			if h.pvc != "cache-"+h.node.Name {
				t.Errorf("%s mounts %q", h.node.Name, h.pvc)
			}
		}
	}
}

// A kept cache (kubernetes.cache_namespace) lives in its own namespace, outside the run's
// manifest and without the run's label, its populate Jobs beside it; the next run reuses the PVC
// as it is, and one on another StorageClass is refused with what to do.
func TestCacheKeptAcrossRuns(t *testing.T) {
	defer func(d time.Duration) { pollEvery = d }(pollEvery)
	pollEvery = 5 * time.Millisecond
	cs := fake.NewClientset()
	cfg := config.Defaults()
	cfg.Models = []string{"m/one"}
	var said []string
	run := func(id, class string) (*nodeHost, *fleet.Manifest, error) {
		man, err := fleet.NewManifest(t.TempDir(), "kubernetes", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		id = "20260101T000000Z-" + id
		r := &Run{cl: &Cluster{Client: cs}, cfg: cfg, ns: Namespace(id), cacheNS: "gpuvet-cache", man: man, class: class, access: corev1.ReadWriteOnce,
			opt: Options{RunID: id, Image: "img", Progress: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}}
		r.size.Set(1 << 30)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go completeJobs(ctx, cs, "gpuvet-cache")
		if err := r.ensureCacheNamespace(ctx); err != nil {
			t.Fatal(err)
		}
		h := &nodeHost{r: r, node: Node{Name: "a"}}
		return h, man, h.provisionCache(ctx)
	}
	h, man, err := run("r1", "sc")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pvc, err := cs.CoreV1().PersistentVolumeClaims("gpuvet-cache").Get(ctx, "cache-a", metav1.GetOptions{})
	if err != nil || h.pvc != "cache-a" {
		t.Fatalf("the kept PVC: %v (the node mounts %q)", err, h.pvc)
	}
	if pvc.Labels[LabelRun] != "" || pvc.Labels[LabelCache] != "true" {
		t.Errorf("the kept PVC's labels %v: want no run label (cleaning a run leaves it) and %s", pvc.Labels, LabelCache)
	}
	for _, o := range man.Live() {
		if o.Kind == "PersistentVolumeClaim" {
			t.Errorf("the kept PVC is in the run's manifest: %s", o)
		}
	}
	if jobs, _ := cs.BatchV1().Jobs("gpuvet-cache").List(ctx, metav1.ListOptions{}); len(jobs.Items) != 1 || jobs.Items[0].Labels[LabelRun] != "20260101T000000Z-r1" || jobs.Items[0].Name != "cache-0-0-r1" {
		t.Fatalf("populate Jobs in the cache namespace: %+v", jobs.Items)
	}
	if ns, err := cs.CoreV1().Namespaces().Get(ctx, "gpuvet-cache", metav1.GetOptions{}); err != nil || ns.Labels[LabelManagedBy] != "" || ns.Labels[LabelCache] != "true" {
		t.Errorf("the cache namespace: %v %v (a run namespace's label would make `gpuvet clean` delete it)", err, ns)
	}
	said = nil
	if _, _, err := run("r2", "sc"); err != nil {
		t.Fatal(err)
	}
	if l, _ := cs.CoreV1().PersistentVolumeClaims("gpuvet-cache").List(ctx, metav1.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d PVCs after the second run, want the one kept", len(l.Items))
	}
	if !strings.Contains(strings.Join(said, "\n"), "reusing PVC gpuvet-cache/cache-a") {
		t.Errorf("the second run does not say it reuses the PVC: %q", said)
	}
	if _, _, err := run("r3", "other"); err == nil || !strings.Contains(err.Error(), "is on StorageClass sc, and this run asks for other") {
		t.Errorf("a kept PVC of another class: %v", err)
	}
}

func TestCompletionFailures(t *testing.T) {
	urls := []string{"http://a:8000", "http://b:8000", "http://c:8000", "http://d:8000"}
	b := []byte(`[{"url":"http://a:8000","tokens":3,"seconds":0.2},
		{"url":"http://b:8000","seconds":20.4,"error":"HTTP 500: {\"message\":\"simulated engine error\"}"},
		{"url":"http://c:8000","tokens":0,"seconds":0.1}]`)
	f, err := completionFailures(b, urls)
	if err != nil {
		t.Fatal(err)
	}
	if f[0] != "" || !strings.Contains(f[1], "Ready, but a real completion failed after 20.4s: HTTP 500: {\"message\":\"simulated engine error\"}") ||
		!strings.Contains(f[2], "no tokens") || !strings.Contains(f[3], "no completion check result") {
		t.Errorf("%q", f)
	}
	if _, err := completionFailures([]byte("{"), urls); err == nil {
		t.Error("a damaged result passed")
	}
}

// Finding 7 of issue 43: a cache namespace that exists and that gpuvet did not create is refused
// before anything goes there, unless kubernetes.cache_namespace_allow_existing names it; the
// cluster's own are refused whatever is allowed.
func TestCacheNamespaceNotGpuvetsRefused(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{legacyCache: "true"}}})
	for _, c := range []struct {
		ns    string
		allow bool
		want  string
	}{{"team-a", false, "gpuvet did not create it"}, {"team-a", true, ""}, {"kube-system", true, "the cluster's own"},
		{"default", true, "the cluster's own"}, {"old", false, ""}, {"gpuvet-cache", false, ""}} {
		r := &Run{cl: &Cluster{Client: cs}, cacheNS: c.ns, opt: Options{CacheNamespaceAllowExisting: c.allow, Progress: func(string, ...any) {}}}
		err := r.ensureCacheNamespace(ctx)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s (allow %v): %v, want %q", c.ns, c.allow, err, c.want)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("the default namespace was created by gpuvet")
	}
}

// TestKeptPVCNotGpuvetsRefused: in a cache namespace gpuvet did not create
// (cache_namespace_allow_existing), a PVC that happens to have the name gpuvet would give its
// cache (cache, cache-NODE) but not its label is someone else's: gpuvet neither fills it with
// model files nor mounts it into engine pods, and says what to do.
func TestKeptPVCNotGpuvetsRefused(t *testing.T) {
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "cache-a", Namespace: "team-a", Labels: map[string]string{"app": "theirs"}}})
	cfg := config.Defaults()
	cfg.Models = []string{"m/one"}
	id := "20260101T000000Z-r1"
	man, err := fleet.NewManifest(t.TempDir(), "kubernetes", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{cl: &Cluster{Client: cs}, cfg: cfg, ns: Namespace(id), cacheNS: "team-a", man: man, class: "sc", access: corev1.ReadWriteOnce,
		opt: Options{RunID: id, Image: "img", CacheNamespaceAllowExisting: true, Progress: func(string, ...any) {}}}
	r.size.Set(1 << 30)
	h := &nodeHost{r: r, node: Node{Name: "a"}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // a populate Job would never end here
	defer cancel()
	err = h.provisionCache(ctx)
	if err == nil || !strings.Contains(err.Error(), "not gpuvet's") {
		t.Fatalf("a PVC gpuvet did not make: %v", err)
	}
	if jobs, _ := cs.BatchV1().Jobs("team-a").List(context.Background(), metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("populate Jobs started into someone else's PVC: %d", len(jobs.Items))
	}
}
