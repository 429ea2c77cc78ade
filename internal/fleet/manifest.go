package fleet

import (
	"bytes"
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
//
// It is two files: the document (Path: the run, where its objects live, and its objects as of the
// document's last full write) and its journal beside it (one JSON line per change since: an object
// recorded, or objects deleted). Recording an object is one append, so keeping the manifest costs a
// run in proportion to its objects, not their square: a 1,000-node Kubernetes run records ~42,000,
// and rewriting the whole document for each took most of gpuvet's own CPU and held every node
// waiting on the manifest's lock. Reading replays the journal over the document.
type Manifest struct {
	mu      sync.Mutex
	path    string
	index   map[Object]int // an object's key → its place in Objects
	journal *os.File       // open for appending once the first change is written

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

func (o Object) same(p Object) bool { return o.key() == p.key() }

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
		StartedAt: time.Now().UTC(), Target: target, Objects: []Object{}, index: map[Object]int{}}
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
	return m.change(change{Record: &o})
}

// Deleted marks o removed.
func (m *Manifest) Deleted(o Object) error { return m.DeletedAll([]Object{o}) }

// DeletedAll marks objs removed, in one line of the journal: a run that ends with thousands of
// objects marks them at once.
func (m *Manifest) DeletedAll(objs []Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]Object, len(objs))
	for i, o := range objs {
		keys[i] = o.key()
	}
	return m.change(change{Deleted: keys})
}

// change is one line of the journal: an object recorded (again: it is live again), or objects
// deleted (by their keys).
type change struct {
	Record  *Object  `json:"record,omitempty"`
	Deleted []Object `json:"deleted,omitempty"`
}

// change appends c to the journal, then applies it: what the file does not hold never happened.
// One write of one line: a kill -9 cannot cut it (a write to a file is done or not begun), and a
// line cut short by a crash of the machine is read as never written (ReadManifest).
func (m *Manifest) change(c change) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if m.journal == nil {
		if m.journal, err = os.OpenFile(journalPath(m.path), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			return err
		}
	}
	if _, err := m.journal.Write(append(b, '\n')); err != nil {
		return err
	}
	m.apply(c)
	return nil
}

func (m *Manifest) apply(c change) {
	if o := c.Record; o != nil {
		if i, ok := m.index[o.key()]; ok {
			m.Objects[i].Deleted = false
		} else {
			m.index[o.key()] = len(m.Objects)
			m.Objects = append(m.Objects, *o)
		}
	}
	for _, k := range c.Deleted {
		if i, ok := m.index[k.key()]; ok {
			m.Objects[i].Deleted = true
		}
	}
}

func (m *Manifest) reindex() {
	m.index = make(map[Object]int, len(m.Objects))
	for i, o := range m.Objects {
		m.index[o.key()] = i
	}
}

// journalPath is the journal beside a manifest document ("….jsonl": Manifests lists only the
// documents).
func journalPath(path string) string { return strings.TrimSuffix(path, ".json") + ".jsonl" }

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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeJournal()
	// The document first: a journal left without it is never read (a kill between the two leaves
	// litter, not a run to clean).
	for _, p := range []string{m.path, journalPath(m.path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (m *Manifest) closeJournal() {
	if m.journal != nil {
		m.journal.Close()
		m.journal = nil
	}
}

// Keep writes the manifest as it is and leaves it in place, whatever is left: an interrupted run
// keeps it for `gpuvet clean --manifest`, which confirms nothing is left and removes it.
func (m *Manifest) Keep() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.save()
}

// save writes the whole document, with every object, then drops the journal it now holds. A kill
// between the two leaves both: the journal's changes replay over the document to the same objects.
func (m *Manifest) save() error {
	if err := results.WriteJSON(m.path, m); err != nil {
		return err
	}
	m.closeJournal()
	if err := os.Remove(journalPath(m.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

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
	m.reindex()
	if err := m.replay(); err != nil {
		return nil, err
	}
	return &m, nil
}

// replay applies the journal's changes. A last line without its newline is a write cut short (the
// machine stopped during it): its object was never created, so it is left out, and cut from the
// file, so that the changes `gpuvet clean` appends next do not follow half a line. Any other line
// that is no change is an error naming it.
func (m *Manifest) replay() error {
	jp := journalPath(m.path)
	b, err := os.ReadFile(jp)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	lines := bytes.Split(b, []byte{'\n'})
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var c change
		err := json.Unmarshal(l, &c)
		if err == nil && c.Record == nil && len(c.Deleted) == 0 {
			err = errors.New("neither record nor deleted")
		}
		if err != nil {
			if i == len(lines)-1 {
				_ = os.Truncate(jp, int64(len(b)-len(l)))
				break
			}
			return fmt.Errorf("%s line %d: not a gpuvet manifest change (%v): remove the line and run gpuvet clean again", jp, i+1, err)
		}
		m.apply(c)
	}
	return nil
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
