package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Manifest is the run's list of every object a backend creates (namespaces, pods, VMs, remote
// directories), each written to disk *before* it is created and marked deleted after. A run that is
// killed leaves its manifest behind; `gpuvet clean` reads it and removes what is still listed.
// It holds names and places only, never a secret.
type Manifest struct {
	mu   sync.Mutex
	path string

	Backend   string    `json:"backend"`
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	// Target says where the objects live: a kubeconfig context and server, an SSH user@host list.
	Target  map[string]string `json:"target,omitempty"`
	Objects []Object          `json:"objects"`
}

// Object is one created thing. Kind and Name are the backend's ("Namespace", "gpuvet-…"; "dir",
// "/tmp/gpuvet-…"); Host is where it lives, for backends with per-host objects.
type Object struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Host      string `json:"host,omitempty"`
	// Via is how `gpuvet clean` reconnects to Host: the name the user gave (an ssh_config alias,
	// whose HostName, User, Port and IdentityFile apply again). Identity is the key file the run
	// used (a path, never a key). LocalOut is where the object's partial results go when clean
	// collects them before deleting (the run's --out/hosts/NAME).
	Via      string `json:"via,omitempty"`
	Identity string `json:"identity_file,omitempty"`
	LocalOut string `json:"local_out,omitempty"`
	// KnownHosts is the known_hosts file that trusts Host's key when it is not the user's (a VM's
	// key, trusted on first use by the run). On names the object this one lives on (a VM): it is
	// gone when that is, and clean removes it before that.
	KnownHosts string    `json:"known_hosts,omitempty"`
	On         string    `json:"on,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// Deleted is set once the backend has removed it (and waited for it, where that applies).
	Deleted bool `json:"deleted,omitempty"`
}

func (o Object) same(p Object) bool {
	return o.Kind == p.Kind && o.Name == p.Name && o.Namespace == p.Namespace && o.Host == p.Host
}

// String names the object for messages: "Namespace gpuvet-x", "Pod ns/name on node-1".
func (o Object) String() string {
	s := o.Kind + " "
	if o.Namespace != "" {
		s += o.Namespace + "/"
	}
	s += o.Name
	if o.Host != "" {
		s += " on " + o.Host
	}
	return s
}

// StateDir is where manifests live: $GPUVET_STATE_DIR, else $XDG_STATE_HOME/gpuvet/runs, else
// ~/.local/state/gpuvet/runs — outside the output directory, so `gpuvet clean` finds them from
// anywhere.
func StateDir() (string, error) {
	if d := os.Getenv("GPUVET_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gpuvet", "runs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory for run manifests: set GPUVET_STATE_DIR (%v)", err)
	}
	return filepath.Join(home, ".local", "state", "gpuvet", "runs"), nil
}

// ManifestPath is the manifest file of one run in dir.
func ManifestPath(dir, backend, runID string) string {
	return filepath.Join(dir, backend+"-"+runID+".json")
}

// NewManifest creates (and writes) an empty manifest for a run in dir.
func NewManifest(dir, backend, runID string, target map[string]string) (*Manifest, error) {
	m := &Manifest{path: ManifestPath(dir, backend, runID), Backend: backend, RunID: runID,
		StartedAt: time.Now().UTC(), Target: target, Objects: []Object{}}
	if err := m.save(); err != nil {
		return nil, fmt.Errorf("run manifest: %v (set GPUVET_STATE_DIR to a writable directory)", err)
	}
	return m, nil
}

// Path is the manifest's file.
func (m *Manifest) Path() string { return m.path }

// SetTarget adds where the objects live (a kubeconfig context and server) and writes the manifest.
func (m *Manifest) SetTarget(key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Target == nil {
		m.Target = map[string]string{}
	}
	m.Target[key] = value
	return m.save()
}

// Record writes o to the manifest before the caller creates it; an error means: do not create.
func (m *Manifest) Record(o Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Now().UTC()
	}
	for i := range m.Objects {
		if m.Objects[i].same(o) {
			m.Objects[i].Deleted = false
			return m.save()
		}
	}
	m.Objects = append(m.Objects, o)
	return m.save()
}

// Deleted marks o removed.
func (m *Manifest) Deleted(o Object) error { return m.DeletedAll([]Object{o}) }

// DeletedAll marks objs removed, in one write of the file: a run that ends with thousands of
// objects (a 1,000-node Kubernetes run has ~19,000) marks them at once, not one file rewrite each.
func (m *Manifest) DeletedAll(objs []Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	gone := make(map[Object]bool, len(objs))
	for _, o := range objs {
		gone[o.key()] = true
	}
	for i := range m.Objects {
		if gone[m.Objects[i].key()] {
			m.Objects[i].Deleted = true
		}
	}
	return m.save()
}

// key is what same compares: the object without its times and state.
func (o Object) key() Object {
	return Object{Kind: o.Kind, Name: o.Name, Namespace: o.Namespace, Host: o.Host}
}

// Live lists the objects not yet deleted, newest first (the order to delete them in).
func (m *Manifest) Live() []Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Object
	for _, o := range m.Objects {
		if !o.Deleted {
			out = append(out, o)
		}
	}
	slices.Reverse(out)
	return out
}

// Finish removes the manifest file when nothing is left alive; otherwise it keeps it for `gpuvet
// clean` and says so.
func (m *Manifest) Finish() error {
	if live := m.Live(); len(live) > 0 {
		return fmt.Errorf("%d object(s) left (first: %s): run `gpuvet clean --run %s`; manifest %s", len(live), live[0], m.RunID, m.path)
	}
	if err := os.Remove(m.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Keep writes the manifest as it is and leaves it in place, whatever is left: an interrupted run
// keeps it for `gpuvet clean --manifest`, which confirms nothing is left and removes it.
func (m *Manifest) Keep() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.save()
}

func (m *Manifest) save() error { return results.WriteJSON(m.path, m) }

// ReadManifest reads one manifest file.
func ReadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a gpuvet run manifest (%v)", path, err)
	}
	if m.Backend == "" || m.RunID == "" {
		return nil, fmt.Errorf("%s: not a gpuvet run manifest (no backend or run_id)", path)
	}
	m.path = path
	return &m, nil
}

// Manifests lists the manifests in dir for backend ("" = any) and run id ("" = any), oldest first.
// A file that cannot be read is returned as an error next to the ones that can.
func Manifests(dir, backend, runID string) ([]*Manifest, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Manifest
	var errs []error
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, err := ReadManifest(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if (backend == "" || m.Backend == backend) && (runID == "" || m.RunID == runID) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out, errors.Join(errs...)
}
