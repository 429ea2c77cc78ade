package k8s

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/enginekind"
)

// Domain is the prefix of every label, annotation and taint key of gpuvet's own, on its objects and
// on the nodes it vets (an older one: legacyDomain).
const Domain = "gpuvet.io/"

// Labels every object of a run carries, so `gpuvet clean` finds what a killed run left.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "gpuvet"
	LabelRun       = Domain + "run-id"
	LabelRole      = Domain + "role" // engine, load, health, cache
	LabelNode      = Domain + "node"
	LabelModel     = Domain + "model" // slug of the model id
	LabelSlot      = Domain + "slot"  // an engine pod's slot on its node
)

// Roles of the pods a run creates.
const (
	RoleEngine = "engine"
	RoleLoad   = "load"
	RoleHealth = "health"
	RoleCache  = "cache"
)

// GpuvetBinary is where gpuvet sits in its image (ko's layout: /ko-app/<name>).
const GpuvetBinary = "/ko-app/gpuvet"

// EnginePort is the port every engine pod listens on (one engine per pod, so no port_base offsets).
const EnginePort = 8000

// cacheMount is where the model-cache PVC is mounted (HF_HOME).
const cacheMount = "/cache"

// tokenSecret names the run's hub-token Secret: one per run (a cache namespace may hold several).
func tokenSecret(runID string) string { return dnsName("gpuvet-hub-token", runID) }

// Namespace is the run's namespace: gpuvet-<run id>, lower case (a DNS label).
func Namespace(runID string) string { return "gpuvet-" + strings.ToLower(runID) }

var (
	notDNS   = regexp.MustCompile(`[^a-z0-9-]+`)
	notLabel = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// dnsName turns parts into a DNS-1123 label (≤ 63 chars): lower case, [a-z0-9-].
func dnsName(parts ...string) string {
	in := strings.Join(parts, "-")
	s := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(in), "-"), "-")
	return cut63(s, in, "-")
}

// labelValue makes s a valid label value (≤ 63, alphanumerics and -_.).
func labelValue(s string) string {
	in := s
	s = strings.Trim(notLabel.ReplaceAllString(s, "_"), "-_.")
	return cut63(s, in, "-_.")
}

// cut63 bounds s to 63 characters, a longer one ending in a hash of in (what it was made from): two
// long node names that differ past the cut must not share a label, which a node's cleanup selects by.
func cut63(s, in, trim string) string {
	if len(s) <= 63 {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(in))
	return fmt.Sprintf("%s-%08x", strings.Trim(s[:63-9], trim), h.Sum32())
}

// runLabels are a run's object's labels. LabelPartOf is on every gpuvet object, the kept cache's
// too: a site policy selects gpuvet's namespaces by it.
func runLabels(runID, role, node string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelRun: runID}
	if role != "" {
		l[LabelRole] = role
	}
	return withNode(l, node)
}

// Labels of the kept model cache (its namespace and PVCs): gpuvet's, of no run, so cleaning runs
// leaves them; `gpuvet clean --cache` finds them by LabelCache.
const (
	LabelPartOf = "app.kubernetes.io/part-of"
	LabelCache  = Domain + "model-cache"
)

func cacheLabels(node string) map[string]string {
	return withNode(map[string]string{LabelCache: "true"}, node)
}

// withNode adds LabelPartOf, and the node's label unless node is "".
func withNode(l map[string]string, node string) map[string]string {
	l[LabelPartOf] = ManagedBy
	if node != "" {
		l[LabelNode] = labelValue(node)
	}
	return l
}

// namespaceObject is the run's namespace.
func namespaceObject(runID string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace(runID), Labels: runLabels(runID, "", "")}}
}

// pinToNode requires the pod on one node by name (as DaemonSets do), through the scheduler, so
// an unschedulable request is reported by the scheduler ("Insufficient nvidia.com/gpu").
func pinToNode(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
}

// cachePVC is a model cache on the chosen StorageClass: one node's (ReadWriteOnce), or every
// node's (ReadWriteMany, node "").
func cachePVC(runID, name, node, storageClass string, size resource.Quantity, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: runLabels(runID, RoleCache, node)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: &storageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// gpuvetJob is a one-shot Job running gpuvet (its own image) on a node. It never retries (a retry
// would double the load) and is removed a while after it ends even if gpuvet is gone.
func gpuvetJob(runID, name, role, node, image string, args []string, gpus int, tols []corev1.Toleration) *batchv1.Job {
	zero, ttl := int32(0), int32(3600)
	c := corev1.Container{Name: "gpuvet", Image: image, Command: []string{GpuvetBinary}, Args: args,
		ImagePullPolicy: corev1.PullIfNotPresent}
	if gpus > 0 {
		c.Resources = corev1.ResourceRequirements{Limits: gpuQuantity(gpus)}
	}
	l := runLabels(runID, role, node)
	var aff *corev1.Affinity
	if node != "" { // "": anywhere (the shared cache's populate Job)
		aff = pinToNode(node)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero, TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Affinity: aff, Tolerations: tols,
					Containers: []corev1.Container{c}},
			},
		},
	}
}

// EngineSpec is what an engine pod runs.
type EngineSpec struct {
	Kind, Command, Image string
	ExtraArgs            []string
	Model                string
	TP, MaxModelLen      int
	GPUMemoryUtilization float64
	Env                  map[string]string
	CachePVC             string // the node's model cache, mounted read-only with the hub offline
}

// DefaultEngineImage is the image of an engine kind at the pinned version (enginekind's table).
func DefaultEngineImage(kind, version string) (string, error) {
	if img := enginekind.Get(kind).Image; img != nil {
		return img(version), nil
	}
	return "", fmt.Errorf("engine %s has no default image: give --engine-image", kind)
}

// engineArgs expands the engine's launch template for a pod: on every address of the pod on
// EnginePort (the templates bind 127.0.0.1), GPUs as the device plugin exposes them (0..tp-1).
func engineArgs(es EngineSpec) ([]string, error) {
	tmpl := cmp.Or(es.Command, enginekind.Get(es.Kind).Template)
	if tmpl == "" {
		return nil, fmt.Errorf("engine %s: no launch template (set --engine-cmd)", es.Kind)
	}
	gpus := make([]int, max(1, es.TP))
	for i := range gpus {
		gpus[i] = i
	}
	words, err := engine.Expand(tmpl, engine.Vars{Model: es.Model, Port: EnginePort, GPUs: gpus, TP: max(1, es.TP),
		MaxModelLen: es.MaxModelLen, GPUMemoryUtilization: es.GPUMemoryUtilization})
	if err != nil {
		return nil, err
	}
	loopback := func(a string) bool { return a == "127.0.0.1" || a == "localhost" }
	for i := range words {
		switch {
		case words[i] == "--host" && i+1 < len(words) && loopback(words[i+1]):
			words[i+1] = "0.0.0.0"
		case strings.HasPrefix(words[i], "--host=") && loopback(strings.TrimPrefix(words[i], "--host=")):
			words[i] = "--host=0.0.0.0"
		}
	}
	if words[0] == "gpuvet" {
		words[0] = GpuvetBinary
	}
	return append(words, es.ExtraArgs...), nil
}

// enginePod is one engine on one node: tp GPUs, the model cache read-only, Ready when /health
// answers (gpuvet then also asks for a real completion: ready.go).
func enginePod(runID, name, node string, slot int, es EngineSpec, tols []corev1.Toleration) (*corev1.Pod, error) {
	args, err := engineArgs(es)
	if err != nil {
		return nil, err
	}
	l := runLabels(runID, RoleEngine, node)
	l[LabelModel] = labelValue(es.Model)
	l[LabelSlot] = strconv.Itoa(slot)
	c := corev1.Container{Name: "engine", Image: es.Image, Command: args, ImagePullPolicy: corev1.PullIfNotPresent,
		Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: EnginePort}},
		Resources: corev1.ResourceRequirements{Limits: gpuQuantity(max(1, es.TP))},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(EnginePort)}},
			PeriodSeconds: 5, FailureThreshold: 3},
		Env: envVars(es.Env),
	}
	vols := readCache(&c, es.CachePVC)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Affinity: pinToNode(node), Tolerations: tols,
			Containers: []corev1.Container{c}, Volumes: vols}}, nil
}

// envVars are env as a container's variables, in key order.
func envVars(env map[string]string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out
}

// readCache mounts the model-cache PVC read-only into c (HF_HOME, the hub offline) and returns the
// pod's volumes (none when pvc is "").
func readCache(c *corev1.Container, pvc string) []corev1.Volume {
	if pvc == "" {
		return nil
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "HF_HOME", Value: cacheMount}, corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "1"})
	c.VolumeMounts = []corev1.VolumeMount{{Name: "model-cache", MountPath: cacheMount, ReadOnly: true}}
	return cacheVolume(pvc, true)
}

// cacheVolume is the pod's model-cache volume on pvc.
func cacheVolume(pvc string, readOnly bool) []corev1.Volume {
	return []corev1.Volume{{Name: "model-cache", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc, ReadOnly: readOnly}}}}
}

// tokenEnvVar is HF_TOKEN from the run's Secret of that name.
func tokenEnvVar(secret string) corev1.EnvVar {
	return corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "HF_TOKEN"}}}
}

// CacheUser is the user and group the populate Job writes the cache as: gpuvet's image's (distroless
// "nonroot"), set explicitly for an image built another way. Engines read it as any user (0755/0644).
const CacheUser = 65532

// CacheAccess is how a populate Job gets write access to a fresh cache volume, whose root comes up
// root:root 0755 (ext4/xfs block volumes, hostPath).
type CacheAccess struct {
	Hub         string // the hub (or mirror) the Job downloads from (HF_ENDPOINT; "": the default)
	TokenSecret string // passes HF_TOKEN from the run's Secret of that name ("": no token)
	// OwnerInit adds a root init container with only CAP_CHOWN and CAP_FOWNER (Pod Security
	// baseline) that hands the volume's root to CacheUser where fsGroup does not (hostPath, NFS).
	// Without it the pod meets "restricted" and relies on fsGroup alone.
	OwnerInit bool
}

// withCache makes j a populate Job: the cache PVC read-write at /cache (HF_HOME), the hub token from
// the run's Secret (never a literal in the manifest), the hub mirror, and write access to the volume
// as CacheUser (docs/kubernetes.md, "The model cache's volume").
func withCache(j *batchv1.Job, pvc string, a CacheAccess) {
	ps := &j.Spec.Template.Spec
	c := &ps.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "HF_HOME", Value: cacheMount})
	if a.Hub != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "HF_ENDPOINT", Value: a.Hub})
	}
	if a.TokenSecret != "" {
		c.Env = append(c.Env, tokenEnvVar(a.TokenSecret))
	}
	mount := []corev1.VolumeMount{{Name: "model-cache", MountPath: cacheMount}}
	c.VolumeMounts = mount
	ps.Volumes = cacheVolume(pvc, false)
	// fsGroup makes a CSI block volume's root group-writable by CacheUser (OnRootMismatch: only a
	// fresh volume is walked); the kubelet leaves hostPath and NFS as they are.
	uid, no, yes := int64(CacheUser), false, true
	onRoot := corev1.FSGroupChangeOnRootMismatch
	ps.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes, FSGroup: &uid,
		FSGroupChangePolicy: &onRoot, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if !a.OwnerInit {
		return
	}
	root := int64(0)
	ps.InitContainers = []corev1.Container{{Name: "cache-owner", Image: c.Image, ImagePullPolicy: c.ImagePullPolicy,
		Command:      []string{GpuvetBinary, "cache", "own", cacheMount, "--uid", strconv.Itoa(CacheUser), "--gid", strconv.Itoa(CacheUser)},
		VolumeMounts: mount,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: &no, AllowPrivilegeEscalation: &no,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}}}}}
}
