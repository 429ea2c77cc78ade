package fleet

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Manifest is the run's list of every object a backend creates (namespaces, pods, VMs, remote
// directories), each written to disk *before* it is created and marked deleted after; `gpuvet
// clean` removes what a killed run's still lists. Names and places only, never a secret.
//
// It is two files: the document (Path, as of its last full write) and its journal beside it (one
// JSON line per change since), replayed over it when read. A record is one append: a 1,000-node
// Kubernetes run records ~42,000 objects, and rewriting the document for each took most of
// gpuvet's own CPU and held every node waiting on the manifest's lock.
type Manifest struct {
	mu      sync.Mutex
	path    string
	index   map[Object]int // an object's key → its place in Objects
	journal *os.File       // open for appending once the first change is written
	// cut is where a journal line cut short by a crash begins (-1: none), size the journal's size
	// as read: the first change written cuts the half line first (openJournal).
	cut, size int64
	// lines counts the journal lines this process wrote, synced those on the disk; syncMu lets one
	// fsync at a time run, covering every line written before it (durable).
	lines, synced int64
	syncMu        sync.Mutex

	// Format and Version mark a gpuvet run manifest: any other JSON (a summary.json naming a
	// backend and a run id) is refused, never cleaned or deleted.
	Format    string    `json:"format"`
	Version   int       `json:"version"`
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
	// Via is the name `gpuvet clean` reconnects to Host by (an ssh_config alias applies again);
	// Identity the run's key file (a path, never a key); LocalOut where clean collects the
	// object's partial results before deleting it (the run's --out/hosts/NAME).
	Via      string `json:"via,omitempty"`
	Identity string `json:"identity_file,omitempty"`
	LocalOut string `json:"local_out,omitempty"`
	// KnownHosts trusts Host's key when the user's files do not (a VM's, trusted on first use by
	// the run). On names the object this one lives on (a VM): it goes with it, and clean removes
	// this one first.
	KnownHosts string    `json:"known_hosts,omitempty"`
	On         string    `json:"on,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// Deleted is set once the backend has removed it (and waited for it, where that applies).
	Deleted bool `json:"deleted,omitempty"`
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

// StateDir is where manifests live, outside any output directory so `gpuvet clean` finds them from
// anywhere: $GPUVET_STATE_DIR, else $XDG_STATE_HOME/gpuvet/runs, else ~/.local/state/gpuvet/runs.
func StateDir() (string, error) {
	if d := os.Getenv("GPUVET_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gpuvet", "runs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory for run manifests: set GPUVET_STATE_DIR (%w)", err)
	}
	return filepath.Join(home, ".local", "state", "gpuvet", "runs"), nil
}

// The format marker and version of the manifests this gpuvet writes and reads.
const (
	ManifestFormat  = "gpuvet-run-manifest"
	ManifestVersion = 1
)

// ManifestPath is the manifest file of one run in dir.
func ManifestPath(dir, backend, runID string) string {
	return filepath.Join(dir, backend+"-"+runID+".json")
}

// NewManifest creates (and writes) an empty manifest for a run in dir.
func NewManifest(dir, backend, runID string, target map[string]string) (*Manifest, error) {
	m := &Manifest{path: ManifestPath(dir, backend, runID), Format: ManifestFormat, Version: ManifestVersion,
		Backend: backend, RunID: runID, StartedAt: time.Now().UTC(), Target: target, Objects: []Object{},
		index: map[Object]int{}, cut: -1}
	if err := checkNames(backend, runID); err != nil {
		return nil, err
	}
	// The run holds its manifest's lock until it ends: `gpuvet clean` leaves a live run's alone.
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = m.Claim()
	}
	if err == nil {
		err = m.save()
	}
	if err != nil {
		return nil, fmt.Errorf("run manifest: %w (set GPUVET_STATE_DIR to a writable directory)", err)
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

// Record writes o to the manifest, on the disk, before the caller creates it; an error means: do
// not create. A record lost with the page cache in a crash of this machine would leave a taint, a
// drain or a pod that no clean could find.
func (m *Manifest) Record(o Object) error {
	m.mu.Lock()
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Now().UTC()
	}
	err := m.change(change{Record: &o})
	n := m.lines
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return m.durable(n)
}

// durable returns once journal line n is on the disk. One fsync covers every line written before
// it, so the nodes that record at once share it (a disk's fsync takes 0.2–10 ms; a 1,000-node run
// records ~42,000 objects). Deletions are not waited for: one lost in a crash is deleted again by
// clean, which finds the object gone.
func (m *Manifest) durable(n int64) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	f, upto, done := m.journal, m.lines, m.synced >= n
	m.mu.Unlock()
	if done {
		return nil
	}
	err := syncJournal(f)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.synced = max(m.synced, upto)
	}
	if m.synced >= n { // synced here, or by a save that wrote the whole document meanwhile
		return nil
	}
	return fmt.Errorf("run manifest journal: %w", err)
}

// Deleted marks o removed.
func (m *Manifest) Deleted(o Object) error { return m.DeletedAll([]Object{o}) }

// DeletedAll marks objs removed in one journal line (a run ends with thousands at once).
func (m *Manifest) DeletedAll(objs []Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]Object, len(objs))
	for i, o := range objs {
		keys[i] = o.key()
	}
	for len(keys) > 0 { // lines of deletedPerLine keys at most: every line stays under its bound
		n := min(len(keys), deletedPerLine)
		if err := m.change(change{Deleted: keys[:n]}); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// deletedPerLine bounds the keys of one journal line: with names at their bound (checkObject) a
// line stays under filelimit.ManifestLine.
const deletedPerLine = 128

// change is one journal line: an object recorded (live again, if it was deleted), or objects
// deleted (by their keys).
type change struct {
	Record  *Object  `json:"record,omitempty"`
	Deleted []Object `json:"deleted,omitempty"`
}

// change appends c to the journal, then applies it: what the file does not hold never happened.
// One write of one line: a kill -9 cannot cut it, and a line a machine crash cut short reads as
// never written.
func (m *Manifest) change(c change) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if len(b) >= filelimit.ManifestLine {
		return fmt.Errorf("run manifest: a change of %d bytes is over the journal's line bound (%s)", len(b), filelimit.Size(filelimit.ManifestLine))
	}
	if m.journal == nil {
		if err := m.openJournal(); err != nil {
			return err
		}
	}
	if _, err := m.journal.Write(append(b, '\n')); err != nil {
		return err
	}
	m.lines++
	m.apply(c)
	return nil
}

// openJournal opens the journal for appending: under the manifest's lock, never through a link,
// after cutting a half line a crash left (only if the journal is still as it was read).
func (m *Manifest) openJournal() error {
	if err := m.Claim(); err != nil {
		return err
	}
	jp := journalPath(m.path)
	f, err := filelimit.OpenRegular(jp, os.O_WRONLY|os.O_CREATE|os.O_APPEND, "run manifest journal")
	if err != nil {
		return err
	}
	// A journal gpuvet writes has one name: another (a hard link to some other file) is not written.
	if st, err := f.Stat(); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 1 {
		f.Close()
		return fmt.Errorf("%s: not a journal gpuvet wrote (a second name links to it, or it cannot be read): not written; remove it", jp)
	}
	if m.cut >= 0 {
		st, err := f.Stat()
		if err == nil && st.Size() != m.size {
			err = fmt.Errorf("changed since it was read (%d bytes, was %d)", st.Size(), m.size)
		}
		if err == nil {
			err = f.Truncate(m.cut)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("%s: cutting the line a crash left half written: %w", jp, err)
		}
		m.cut = -1
	}
	m.journal = f
	return syncDir(filepath.Dir(jp))
}

// syncJournal puts the journal's lines on the disk (a variable: a test sees each call).
var syncJournal = (*os.File).Sync

// syncDir puts a folder's entries on the disk: a journal just created is found after a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Claim takes the manifest's lock (a flock'd file beside it). The run holds it until it ends, so
// `gpuvet clean` writes, repairs or removes only a manifest no live run holds. Within one process
// a claim is shared (the run and a test's second reader of its manifest).
func (m *Manifest) Claim() error {
	lp := lockPath(m.path)
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[lp] != nil {
		return nil
	}
	f, err := filelimit.OpenRegular(lp, os.O_RDWR|os.O_CREATE, "run manifest lock")
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s is held by the gpuvet that runs %s-%s: let it finish (or stop it), then clean", ErrLive, lp, m.Backend, m.RunID)
		}
		return fmt.Errorf("lock %s: %w", lp, err)
	}
	held[lp] = f
	return nil
}

// ErrLive is wrapped by Claim's error when the manifest's run is still going.
var ErrLive = errors.New("the run is live")

var (
	heldMu sync.Mutex
	held   = map[string]*os.File{} // lock file → this process's claim on it
)

func (m *Manifest) release() {
	lp := lockPath(m.path)
	heldMu.Lock()
	defer heldMu.Unlock()
	if f := held[lp]; f != nil {
		_ = os.Remove(lp) // before the unlock: a claim after this one locks a new file
		f.Close()
		delete(held, lp)
	}
}

func lockPath(path string) string { return strings.TrimSuffix(path, ".json") + ".lock" }

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

// journalPath is the journal beside a manifest document (.jsonl: Manifests lists only *.json).
func journalPath(path string) string { return strings.TrimSuffix(path, ".json") + ".jsonl" }

// key is what same compares: the object without its times and state.
func (o Object) key() Object {
	return Object{Kind: o.Kind, Name: o.Name, Namespace: o.Namespace, Host: o.Host}
}

// Same says whether two objects name one thing on one host (kind, name and host).
func (o Object) Same(p Object) bool { return o.Kind == p.Kind && o.Name == p.Name && o.Host == p.Host }

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
		return fmt.Errorf("%d object(s) left (first: %s): run `gpuvet clean --run %s`; if clean cannot remove them (a host gone for good, a record that does not vouch), remove them by hand and drop the manifest with `gpuvet clean --run %s --forget`; manifest %s",
			len(live), live[0], m.RunID, m.RunID, m.path)
	}
	return m.remove()
}

// Forget drops the manifest, touching none of what it lists (gpuvet clean --forget: the operator's
// word that it is gone or theirs), and returns what it listed.
func (m *Manifest) Forget() ([]Object, error) {
	live := m.Live()
	return live, m.remove()
}

// remove deletes the manifest file and its journal, once clean or this run holds it.
func (m *Manifest) remove() error {
	if err := m.Claim(); err != nil { // a live run's manifest is its own to remove
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeJournal()
	// The document first: a journal without one is never read (litter, not a run to clean).
	for _, p := range []string{m.path, journalPath(m.path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	m.release()
	return nil
}

func (m *Manifest) closeJournal() {
	if m.journal != nil {
		m.journal.Close()
		m.journal = nil
	}
}

// Keep writes the manifest, leaves it in place and gives up the run's lock: an interrupted run
// hands it to `gpuvet clean`, which confirms nothing is left and removes it.
func (m *Manifest) Keep() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.save()
	m.release()
	return err
}

// save writes the whole document, then drops the journal it now holds (a kill between the two
// leaves both, which replay to the same objects).
func (m *Manifest) save() error {
	if err := results.WriteJSON(m.path, m); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(m.path)); err != nil { // the new document is found before the journal goes
		return err
	}
	m.synced = m.lines // the document on the disk holds every line
	m.closeJournal()
	if err := os.Remove(journalPath(m.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ReadManifest reads one manifest file, never writing (a journal line a crash cut short is left
// out, and cut only by this manifest's first change). A file that is not gpuvet's (no format
// marker; not named BACKEND-RUN.json; a link, a FIFO, a device; over its size bound) is an error.
func ReadManifest(path string) (*Manifest, error) {
	b, err := filelimit.Regular(path, filelimit.Manifest, "run manifest")
	if err != nil {
		return nil, err
	}
	m := Manifest{cut: -1}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a gpuvet run manifest (%w)", path, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("%s: not a gpuvet run manifest (no \"format\": %q): a summary.json or any other file is never cleaned; a run's manifest is BACKEND-RUN.json in the state directory ($GPUVET_STATE_DIR): `gpuvet clean --run RUN` finds it; one written by a gpuvet older than the marker is cleaned by that gpuvet, or removed by hand", path, ManifestFormat)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("%s: run manifest version %d; this gpuvet reads version %d: clean it with the gpuvet that ran it", path, m.Version, ManifestVersion)
	}
	if err := checkNames(m.Backend, m.RunID); err != nil {
		return nil, fmt.Errorf("%s: not a gpuvet run manifest (%w)", path, err)
	}
	if want := m.Backend + "-" + m.RunID + ".json"; filepath.Base(path) != want {
		return nil, fmt.Errorf("%s: not a gpuvet run manifest: it names backend %s and run %s, so its file is %s", path, m.Backend, m.RunID, want)
	}
	for i, o := range m.Objects {
		if err := checkObject(o); err != nil {
			return nil, fmt.Errorf("%s: object %d: %w", path, i+1, err)
		}
	}
	m.path = path
	m.reindex()
	if err := m.replay(); err != nil {
		return nil, err
	}
	return &m, nil
}

// checkNames refuses a backend or run id that is not one gpuvet makes: they name files here and
// on hosts.
func checkNames(backend, runID string) error {
	ok := func(s string, n int, chars string) bool {
		return s != "" && len(s) <= n && strings.Trim(s, chars) == ""
	}
	if !ok(backend, 32, "abcdefghijklmnopqrstuvwxyz") {
		return fmt.Errorf("backend %s is not one gpuvet has", Quote(backend))
	}
	if !ok(runID, 64, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.") || strings.HasPrefix(runID, ".") {
		return fmt.Errorf("run id %s is not one gpuvet makes (letters, digits, - _ . up to 64)", Quote(runID))
	}
	return nil
}

// Bounds of an object's names: far over any real one (a Kubernetes name is at most 253 bytes, a
// path 4,096), far under what would flood a terminal or a log with every message naming it.
const (
	maxName = 512
	maxPath = 4096
)

// checkObject refuses an object whose fields are over their bounds or hold control characters (a
// line break in a name would forge lines of gpuvet's own output).
func checkObject(o Object) error {
	if o.Kind == "" || len(o.Kind) > 64 {
		return fmt.Errorf("kind %s: not one gpuvet records", Quote(o.Kind))
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"name", o.Name, maxName}, {"namespace", o.Namespace, maxName}, {"host", o.Host, maxName}, {"via", o.Via, maxName},
		{"on", o.On, maxName}, {"identity_file", o.Identity, maxPath}, {"local_out", o.LocalOut, maxPath}, {"known_hosts", o.KnownHosts, maxPath}} {
		if len(f.v) > f.max {
			return fmt.Errorf("%s %s…: %d bytes, more than %d", f.name, Quote(f.v), len(f.v), f.max)
		}
		if strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%s %s: holds control characters", f.name, Quote(f.v))
		}
	}
	return nil
}

// Quote quotes at most the first 64 bytes of s, for messages about input that may be hostile (a
// name of 200 MB, a line of binary).
func Quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}

// replay applies the journal's changes. A last line without its newline is a write a machine
// crash cut short: its object was never created, so it is left out (openJournal cuts it). Any
// other line that is no change is an error naming it. The journal is read as the document is: a
// regular file, never through a link, under its bound, each line under its own.
func (m *Manifest) replay() error {
	jp := journalPath(m.path)
	f, err := filelimit.OpenRegular(jp, os.O_RDONLY, "run manifest journal")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return fmt.Errorf("%s: %w", jp, err)
	} else if st.Size() > filelimit.Manifest {
		return fmt.Errorf("%s: %s, over the bound of a run manifest journal (%s): not gpuvet's; remove it", jp, filelimit.Size(st.Size()), filelimit.Size(filelimit.Manifest))
	}
	// Line by line: memory is one line's bound, whatever the file holds.
	br := bufio.NewReaderSize(io.LimitReader(f, filelimit.Manifest), 64<<10)
	var off int64
	for n := 1; ; n++ {
		l, whole, err := readLine(br, filelimit.ManifestLine)
		if err != nil {
			return fmt.Errorf("%s line %d: %w: not gpuvet's; remove the file", jp, n, err)
		}
		if len(l) == 0 && !whole {
			break // the end
		}
		start := off
		off += int64(len(l))
		if whole {
			off++
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		c, err := parseChange(l)
		if err != nil {
			if !whole { // the last line, cut short by a crash
				m.cut = start
				break
			}
			return fmt.Errorf("%s line %d: not a gpuvet manifest change (%w): remove the line and run gpuvet clean again", jp, n, err)
		}
		m.apply(c)
	}
	m.size = off
	return nil
}

// readLine reads one line of at most max bytes (without its newline); whole says a newline ended
// it. A longer line is an error, and no more of it is read.
func readLine(br *bufio.Reader, max int) (line []byte, whole bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max+1 {
			return nil, false, fmt.Errorf("longer than the bound of a manifest change (%s)", filelimit.Size(int64(max)))
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return line[:len(line)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return line, false, nil
		default:
			return nil, false, err
		}
	}
}

// parseChange reads one journal line: a change whose objects are within their bounds.
func parseChange(l []byte) (change, error) {
	var c change
	if err := json.Unmarshal(l, &c); err != nil {
		return c, err
	}
	if c.Record == nil && len(c.Deleted) == 0 {
		return c, errors.New("neither record nor deleted")
	}
	if c.Record != nil {
		if err := checkObject(*c.Record); err != nil {
			return c, err
		}
	}
	for _, o := range c.Deleted {
		if err := checkObject(o); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Manifests lists the manifests in dir for backend and run id ("": any), oldest first, reading
// only files named BACKEND-RUN.json and never writing. Those that cannot be read are the error.
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
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") ||
			(backend != "" && !strings.HasPrefix(n, backend+"-")) || (runID != "" && !strings.HasSuffix(n, "-"+runID+".json")) {
			continue
		}
		m, err := ReadManifest(filepath.Join(dir, n))
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
