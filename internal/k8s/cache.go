package k8s

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/modelcache"
)

// The model cache, as aicr's inference check does it: a PVC filled once by a populate Job per model
// (`gpuvet cache pull`), mounted read-only by the engines: one ReadWriteMany PVC for every node
// where the StorageClass can share a volume, else a ReadWriteOnce PVC per node.
//
// No field says a StorageClass supports ReadWriteMany (a PVC asking for it just stays Pending), so
// model_cache.access_mode auto decides from the provisioner: ReadWriteMany for those listed here,
// ReadWriteOnce for any other (a site whose provisioner is not listed sets ReadWriteMany itself).

// rwxProvisioners are provisioners known to support ReadWriteMany on any of their classes.
var rwxProvisioners = map[string]string{
	"nfs.csi.k8s.io": "NFS CSI",
	"k8s-sigs.io/nfs-subdir-external-provisioner":   "NFS subdir provisioner",
	"cluster.local/nfs-subdir-external-provisioner": "NFS subdir provisioner",
	"cephfs.csi.ceph.com":                           "CephFS CSI",
	"efs.csi.aws.com":                               "Amazon EFS CSI",
	"fsx.csi.aws.com":                               "Amazon FSx for Lustre CSI",
	"file.csi.azure.com":                            "Azure Files CSI",
	"kubernetes.io/azure-file":                      "Azure Files",
	"filestore.csi.storage.gke.io":                  "GCP Filestore CSI",
	"lustre.csi.storage.gke.io":                     "GCP Managed Lustre CSI",
	"driver.longhorn.io":                            "Longhorn (RWX through its share manager's NFS)",
	"spectrumscale.csi.ibm.com":                     "IBM Storage Scale CSI",
	"csi.weka.io":                                   "WEKA CSI",
	"org.democratic-csi.nfs":                        "democratic-csi NFS",
}

// rwxSuffixes match provisioners deployed under an operator's prefix (Rook: rook-ceph.cephfs.csi.ceph.com).
var rwxSuffixes = map[string]string{".cephfs.csi.ceph.com": "CephFS CSI (Rook)", "/nfs-subdir-external-provisioner": "NFS subdir provisioner"}

// knownRWX names the provisioner's family when it is known to support ReadWriteMany ("" otherwise).
func knownRWX(provisioner string) string {
	if n, ok := rwxProvisioners[provisioner]; ok {
		return n
	}
	for suf, n := range rwxSuffixes {
		if strings.HasSuffix(provisioner, suf) {
			return n
		}
	}
	return ""
}

// chooseAccess decides the cache PVC's access mode from model_cache.access_mode and the class, and
// says why.
func chooseAccess(mode string, sc *storagev1.StorageClass, nodes int) (corev1.PersistentVolumeAccessMode, string) {
	what := fmt.Sprintf("StorageClass %s (provisioner %s)", sc.Name, sc.Provisioner)
	fam := knownRWX(sc.Provisioner)
	switch mode {
	case config.AccessRWX:
		if fam == "" {
			return corev1.ReadWriteMany, fmt.Sprintf("ReadWriteMany as model_cache.access_mode asks, on %s, which gpuvet does not know to support it: a PVC it cannot provision stays Pending", what)
		}
		return corev1.ReadWriteMany, fmt.Sprintf("ReadWriteMany as model_cache.access_mode asks, on %s (%s)", what, fam)
	case config.AccessRWO:
		return corev1.ReadWriteOnce, fmt.Sprintf("ReadWriteOnce as model_cache.access_mode asks, one PVC per node, on %s", what)
	}
	if fam != "" {
		return corev1.ReadWriteMany, fmt.Sprintf("ReadWriteMany (model_cache.access_mode auto): %s is %s, known to share a volume between nodes, so one PVC and one download serve all %d node(s)", what, fam, nodes)
	}
	return corev1.ReadWriteOnce, fmt.Sprintf("ReadWriteOnce, one PVC per node (model_cache.access_mode auto): %s is not known to support ReadWriteMany; set model_cache.access_mode ReadWriteMany if it does", what)
}

// storageClass is the named class, or the cluster's default one; none is an error naming the settings.
func (r *Run) storageClass(ctx context.Context) (*storagev1.StorageClass, error) {
	l, err := r.cl.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing StorageClasses: %w", err)
	}
	if r.opt.StorageClass != "" {
		for i := range l.Items {
			if l.Items[i].Name == r.opt.StorageClass {
				return &l.Items[i], nil
			}
		}
		return nil, fmt.Errorf("kubernetes.storage_class (--storage-class) %s: no such StorageClass (have: %s)", r.opt.StorageClass, classNames(l.Items))
	}
	for i := range l.Items {
		if l.Items[i].Annotations[AnnotationDefaultClass] == "true" {
			return &l.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no default StorageClass for the model cache (none has the %s annotation; have: %s): "+
		"name one with kubernetes.storage_class (--storage-class), or disable the cache PVC with model_cache.size off (--cache-size off)",
		AnnotationDefaultClass, classNames(l.Items))
}

func classNames(l []storagev1.StorageClass) string {
	var n []string
	for _, sc := range l {
		n = append(n, sc.Name)
	}
	return cmp.Or(strings.Join(n, ", "), "none")
}

// sharedCache is a run's one ReadWriteMany cache: the first node to need it fills it, the others
// share its outcome.
type sharedCache struct {
	once sync.Once
	err  error
}

// CacheNote says which model cache the run uses and why ("" when it has none).
func (r *Run) CacheNote() string { return r.cacheNote }

// provisionCache gives the node its model cache: the run's shared ReadWriteMany PVC (filled once),
// or its own ReadWriteOnce PVC.
func (h *nodeHost) provisionCache(ctx context.Context) error {
	r := h.r
	if r.access == corev1.ReadWriteMany {
		r.shared.once.Do(func() { r.shared.err = h.fillCache(ctx, "cache", "") })
		if r.shared.err != nil {
			return fmt.Errorf("model cache (shared): %w", r.shared.err)
		}
		h.pvc = "cache"
		return nil
	}
	name := dnsName("cache", h.node.Name)
	if err := h.fillCache(ctx, name, h.node.Name); err != nil {
		return fmt.Errorf("model cache: %w", err)
	}
	h.pvc = name
	return nil
}

// fillCache creates a cache PVC and runs a populate Job per model into it, on node (any node when
// ""). A kept cache is reused as it is: its PVC keeps its size and class, and `gpuvet cache pull`
// downloads only what it is missing.
func (h *nodeHost) fillCache(ctx context.Context, name, node string) error {
	r := h.r
	if err := h.ensurePVC(ctx, name, node); err != nil {
		return err
	}
	for mi, model := range r.cfg.Models {
		job := r.podName("cache", strconv.Itoa(h.index), strconv.Itoa(mi))
		if node == "" {
			job = r.podName("cache", "shared", strconv.Itoa(mi))
		}
		j := gpuvetJob(r.opt.RunID, job, RoleCache, node, r.opt.Image, []string{"cache", "pull", model}, 0, r.opt.Selection.Tolerations)
		withCache(j, name, CacheAccess{Hub: r.hub, TokenSecret: r.tokenSecret(), OwnerInit: r.opt.CacheOwnerInit})
		h.say("model cache: pulling %s from %s into %s PVC %s/%s (%s, %s)", model, cmp.Or(r.hub, modelcache.DefaultEndpoint), r.access, r.cacheNS, name, r.class, r.size.String())
		log, err := h.runJob(ctx, r.podNS(), j)
		if err != nil {
			return populateHint(err, r.opt.CacheOwnerInit)
		}
		if l := pulledLine(log); l != "" {
			h.say("model cache: %s", l)
		}
	}
	return nil
}

// populateHint adds what to do to a populate Job that could not write its volume (`gpuvet cache
// pull`'s own hint, --cache-dir, is not the user's to set for that Job).
func populateHint(err error, ownerInit bool) error {
	if ownerInit && strings.Contains(err.Error(), "its pod cannot be created") {
		return fmt.Errorf("%v\nthe populate Job's init container runs as root with CAP_CHOWN and CAP_FOWNER (it hands a fresh volume's root to uid %d); "+
			"where root containers are refused, set kubernetes.cache_owner_init false (--cache-owner-init=false) and use a StorageClass that applies fsGroup "+
			"(docs/kubernetes.md, \"The model cache's volume\")", err, CacheUser)
	}
	if !strings.Contains(err.Error(), "permission denied") {
		return err
	}
	fix := "the init container could not hand it over either: use a StorageClass whose volumes can be chowned by root or honour fsGroup"
	if !ownerInit {
		fix = "its StorageClass does not apply fsGroup: set kubernetes.cache_owner_init true (a root init container that chowns the volume's root; needs Pod Security baseline), or use a StorageClass that applies fsGroup"
	}
	return fmt.Errorf("%w\nthe cache volume's root is not writable by uid %d, the user the populate Job runs as; %s (docs/kubernetes.md, \"The model cache's volume\")", err, CacheUser, fix)
}

// ensurePVC creates the cache PVC, or finds a kept one (not in the run's manifest: it outlives the run).
func (h *nodeHost) ensurePVC(ctx context.Context, name, node string) error {
	r := h.r
	pvcs := r.cl.Client.CoreV1().PersistentVolumeClaims(r.cacheNS)
	if r.keptCache() {
		old, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if old.Labels[LabelCache] != "true" && old.Labels[legacyCache] != "true" {
				return fmt.Errorf("the PVC %s/%s is not gpuvet's (no label %s=true): gpuvet neither fills nor mounts a volume it did not make; delete or rename it, or keep the cache in another namespace (kubernetes.cache_namespace)",
					r.cacheNS, name, LabelCache)
			}
			if c := old.Spec.StorageClassName; c != nil && *c != r.class {
				return fmt.Errorf("the kept PVC %s/%s is on StorageClass %s, and this run asks for %s: delete it (`gpuvet clean --cache`) or keep this class's cache in another namespace (kubernetes.cache_namespace)",
					r.cacheNS, name, *c, r.class)
			}
			have := old.Spec.Resources.Requests[corev1.ResourceStorage]
			h.say("model cache: reusing PVC %s/%s (%s, %s, created %s)", r.cacheNS, name, have.String(), old.Status.Phase, old.CreationTimestamp.UTC().Format(time.RFC3339))
			if have.Cmp(r.size) < 0 {
				h.say("model cache: PVC %s/%s holds %s, less than model_cache.size %s: it is used as it is (grow it with the StorageClass's volume expansion, or delete it with `gpuvet clean --cache`)",
					r.cacheNS, name, have.String(), r.size.String())
			}
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("PVC %s/%s: %w", r.cacheNS, name, err)
		}
	} else if err := r.man.Record(fleet.Object{Kind: "PersistentVolumeClaim", Namespace: r.ns, Name: name, Host: node}); err != nil {
		return err
	}
	pvc := cachePVC(r.opt.RunID, name, node, r.class, r.size, r.access)
	if r.keptCache() { // not the run's: no run label, so cleaning the run leaves it
		pvc.Labels = cacheLabels(node)
	}
	if _, err := pvcs.Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		if r.keptCache() && apierrors.IsAlreadyExists(err) { // another run made it a moment ago
			return nil
		}
		return fmt.Errorf("PVC %s/%s: %w", r.cacheNS, name, err)
	}
	return nil
}

// ensureCacheNamespace creates the namespace that keeps the cache, unless it is there.
func (r *Run) ensureCacheNamespace(ctx context.Context) error {
	nss := r.cl.Client.CoreV1().Namespaces()
	ns, err := nss.Get(ctx, r.cacheNS, metav1.GetOptions{})
	if config.ClusterNamespace(r.cacheNS) { // config refuses it too: this is the last guard
		return fmt.Errorf("the cache namespace %s (kubernetes.cache_namespace) is the cluster's own: gpuvet creates nothing there", r.cacheNS)
	}
	if err == nil {
		if ns.DeletionTimestamp != nil {
			return fmt.Errorf("the cache namespace %s (kubernetes.cache_namespace) is being deleted: wait until it is gone, then run again", r.cacheNS)
		}
		if ns.Labels[LabelCache] != "true" && ns.Labels[legacyCache] != "true" && !r.opt.CacheNamespaceAllowExisting {
			return fmt.Errorf("the cache namespace %s (kubernetes.cache_namespace) exists and gpuvet did not create it (no label %s=true): gpuvet puts its PVCs and Jobs only in a namespace of its own; name another, or allow this one with kubernetes.cache_namespace_allow_existing: true (gpuvet clean --cache never deletes it)", r.cacheNS, LabelCache)
		}
		r.progress("model cache kept in namespace %s (kubernetes.cache_namespace)", r.cacheNS)
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("the cache namespace %s (kubernetes.cache_namespace): %w", r.cacheNS, err)
	}
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.cacheNS, Labels: cacheLabels("")}}
	if _, err := nss.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the cache namespace %s (kubernetes.cache_namespace): %w", r.cacheNS, err)
	}
	r.progress("model cache namespace %s created (kubernetes.cache_namespace; it stays after the run: `gpuvet clean --cache` removes it)", r.cacheNS)
	return nil
}

// pulledLine is `gpuvet cache pull`'s summary line from its log ("MODEL@COMMIT: N files, SIZE;
// downloaded X in …"), "" when absent.
func pulledLine(log []byte) string {
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "; downloaded ") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
