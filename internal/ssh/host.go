package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/vfio"
)

// ObjectKind is the manifest kind of the folder gpuvet makes on a host.
const ObjectKind = "ssh-dir"

// Host is one SSH host of a fleet run (fleet.Host): Provision connects, records the remote folder
// in the manifest, then creates it and copies gpuvet; Run runs it there; Cleanup removes the folder.
type Host struct {
	Target   Target
	Options  Options
	Job      Job
	Manifest *fleet.Manifest // nil: no manifest (tests)
	// GPUs is how many GPUs the host must show (the inventory's gpus); 0: no count.
	GPUs int
	// Prep installs what the host lacks before the run and purges it after (nil: off).
	Prep *hostprep.Plan
	// VFIO releases the host's GPUs from vfio-pci for the run and restores them after (nil: off;
	// needs Prep: the run needs the driver).
	VFIO *VFIO

	client *gossh.Client
	obj    fleet.Object
	made   bool
	prep   *hostprep.Session
	vfio   *vfio.Release
}

// VFIO is a virtualization node's vfio release: its roots and the GPUs its VMs hold.
type VFIO struct {
	Paths vfio.Paths
	// Attached names the VM holding a GPU, by PCI address (OpenNebula's PCI monitoring).
	Attached map[string]string
}

// Name is the host as the user named it.
func (h *Host) Name() string { return h.Target.Name }

// ExpectGPUs is the inventory's gpus (fleet.GPUCounter).
func (h *Host) ExpectGPUs() int { return h.GPUs }

// Provision connects and prepares the remote folder.
func (h *Host) Provision(ctx context.Context) error {
	c, err := Dial(ctx, h.Target, h.Options)
	if err != nil {
		return err
	}
	h.client = c
	h.obj = fleet.Object{Kind: ObjectKind, Name: h.Job.RemoteDir, Host: Address(h.Target), Via: h.Target.Name,
		LocalOut: fleet.AbsPath(h.Job.LocalOut)}
	if len(h.Target.IdentityFiles) == 1 {
		h.obj.Identity = h.Target.IdentityFiles[0]
	}
	if h.Prep != nil {
		if err := h.prepare(ctx, c); err != nil {
			return err
		}
	}
	if h.Manifest != nil {
		if err := h.Manifest.Record(h.obj); err != nil {
			return fmt.Errorf("run manifest: %w (nothing created on the host)", err)
		}
	}
	err = Prepare(ctx, c, h.Job)
	h.made = err == nil || !errors.Is(err, errNotCreated) // a failed mkdir made nothing to remove
	if !h.made && h.Manifest != nil {
		_ = h.Manifest.Deleted(h.obj)
	}
	return err
}

// prepare releases the GPUs from vfio-pci (VFIO), installs what the host lacks (Prep) and binds the
// released GPUs to the driver, before anything else: a host that cannot be prepared fails with
// nothing changed. Cleanup undoes it.
func (h *Host) prepare(ctx context.Context, c *gossh.Client) error {
	var recorder fleet.Recorder
	if h.Manifest != nil {
		recorder = h.Manifest
	}
	say := h.Job.say
	if h.VFIO != nil {
		if out, err := output(ctx, c, "id -u"); err != nil || strings.TrimSpace(out) != "0" {
			err := fmt.Errorf("host_prep.vfio_release needs a root login on %s (it rebinds PCI devices): log in as root (nothing changed on the host)", h.Target.Name)
			h.Prep.Refused(h.Target.Name, err, nil)
			return err
		}
		var err error
		h.vfio, err = vfio.Begin(ctx, Runner{c}, h.VFIO.Paths, h.VFIO.Attached, recorder, h.obj, h.Job.RunID, say)
		if err != nil {
			h.Prep.Refused(h.Target.Name, err, h.vfio.Steps)
			return err
		}
	}
	var err error
	h.prep, err = h.Prep.Begin(ctx, Runner{c}, recorder, h.obj, h.Target.Name, h.Job.RunID, say)
	if err != nil {
		return err
	}
	if h.vfio != nil {
		err = h.vfio.Bind(ctx)
		h.prep.Rec.VFIO = append(h.prep.Rec.VFIO, h.vfio.Steps...)
	}
	return err
}

// Run runs gpuvet on the host and returns its summary (partial when the run broke).
func (h *Host) Run(ctx context.Context) (*results.Summary, error) {
	out, err := Execute(ctx, h.client, h.Job)
	return out.Summary, err
}

// Cleanup removes the remote folder (safe to run twice), undoes the host's preparation and closes
// the connection, dialling again when it dropped (the host may well be up).
func (h *Host) Cleanup(ctx context.Context) error {
	if h.client == nil {
		return fleet.ErrNothingMade // never connected
	}
	defer func() { h.client.Close() }()
	var errs []error
	if h.made {
		err := h.retry(ctx, func(c *gossh.Client) error { return Remove(ctx, c, h.Job.RemoteDir, h.Job.RunID) })
		if err == nil && h.Manifest != nil {
			err = h.Manifest.Deleted(h.obj)
		}
		errs = append(errs, err)
	}
	if h.vfio != nil {
		// Back on vfio-pci before the driver is purged: the node serves passthrough VMs again.
		n := len(h.vfio.Steps)
		err := h.retry(ctx, func(c *gossh.Client) error { return h.vfio.Restore(ctx, Runner{c}) })
		// The preparation's record, or its refusal's when the release itself failed half-way.
		if rec := h.Prep.Record(h.Target.Name); rec != nil {
			rec.VFIO = append(rec.VFIO, h.vfio.Steps[min(n, len(h.vfio.Steps)):]...)
			if err != nil {
				rec.RestoreError = err.Error()
			}
		}
		errs = append(errs, err)
	}
	if h.prep != nil {
		errs = append(errs, h.retry(ctx, func(c *gossh.Client) error { return h.prep.End(ctx, Runner{c}) }))
	}
	return errors.Join(errs...)
}

// retry runs fn on the connection, and once more on a new one when it fails (a dropped connection).
func (h *Host) retry(ctx context.Context, fn func(*gossh.Client) error) error {
	err := fn(h.client)
	if err != nil && ctx.Err() == nil {
		if c, derr := Dial(ctx, h.Target, h.Options); derr == nil {
			h.client.Close()
			h.client = c
			err = fn(c)
		}
	}
	return err
}

// say reports a host preparation step as a line of the host's progress.
func (j Job) say(l string) {
	if j.Progress != nil {
		j.Progress("host prep: " + l)
	}
}

// Runner runs host preparation's scripts over the SSH connection (hostprep.Runner).
type Runner struct{ C *gossh.Client }

// Run runs script in a new session and returns its stdout.
func (r Runner) Run(ctx context.Context, script string) (string, error) {
	return output(ctx, r.C, script)
}

// Address is how the manifest names a host: user@host:port, enough for `gpuvet clean` to reach it.
func Address(t Target) string { return t.User + "@" + t.Addr() }

// ParseAddress reads Address back.
func ParseAddress(a string) (Target, error) {
	user, hp, ok := strings.Cut(a, "@")
	host, port, err := net.SplitHostPort(hp)
	if !ok || err != nil {
		return Target{}, fmt.Errorf("manifest host %q: want user@host:port", a)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return Target{}, fmt.Errorf("manifest host %q: bad port", a)
	}
	return Target{Name: host, Host: host, Port: p, User: user}, nil
}

// Clean removes what a killed run left on one host: the manifest's ssh-dir object of run runID,
// whose --out was out (the manifest's target "output"). Before any connection the folder must be
// a run folder of runID and local_out a folder under out (hosts/NAME or baremetal/NAME). It
// reconnects as the run did, stops a run still going there, collects its partial results into
// local_out when out is the run's own (its summary.json names the run), then removes the folder,
// only when it carries the run's marker. say reports what it did.
func Clean(ctx context.Context, o fleet.Object, runID, out string, opts Options, say func(string)) error {
	if err := checkRunDir(o.Name, runID); err != nil {
		return err
	}
	collectTo := ""
	if o.LocalOut != "" {
		if err := checkLocalOut(o.LocalOut, out); err != nil {
			return err
		}
		if fleet.OwnOut(out, runID) {
			collectTo = o.LocalOut
		} else {
			say(fmt.Sprintf("warning: %s: partial results not collected: %s holds no summary.json of run %s (not the run's own --out)", o, out, runID))
		}
	}
	c, t, err := reconnect(ctx, o, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	if collectTo != "" {
		if err := Stop(ctx, c, o.Name, runID); err != nil {
			return err
		}
		if err := collectPartial(ctx, c, o.Name, collectTo); err != nil {
			say(fmt.Sprintf("warning: %s: partial results not collected: %v", o, err))
		} else if _, err := os.Stat(filepath.Join(o.LocalOut, "summary.json")); err == nil {
			say(fmt.Sprintf("collected %s's partial results into %s", t.Name, o.LocalOut))
		}
	}
	return Remove(ctx, c, o.Name, runID)
}

// CleanPrep undoes what a killed run's host preparation left on one host (objs: its manifest
// objects of hostprep.Kinds, all on that host), reconnecting as the run did. It returns the
// objects that are gone.
func CleanPrep(ctx context.Context, objs []fleet.Object, runID string, opts Options, say func(string)) ([]fleet.Object, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	c, _, err := reconnect(ctx, objs[0], opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The vfio binding first (the node serves VMs again), then the packages.
	var v, p []fleet.Object
	for _, o := range objs {
		if slices.Contains(vfio.Kinds, o.Kind) {
			v = append(v, o)
		} else {
			p = append(p, o)
		}
	}
	var done []fleet.Object
	var errs []error
	if len(v) > 0 {
		d, err := vfio.Clean(ctx, Runner{c}, vfio.Paths{}, runID, v, say)
		done, errs = append(done, d...), append(errs, err)
	}
	if len(p) > 0 {
		d, err := hostprep.Clean(ctx, Runner{c}, runID, p, say)
		done, errs = append(done, d...), append(errs, err)
	}
	return done, errors.Join(errs...)
}

// checkLocalOut refuses a local_out that is not out/hosts/NAME or out/baremetal/NAME of the run's
// --out, with no link on the way: clean writes there what a remote host sends.
func checkLocalOut(local, out string) error {
	bad := func(why string) error {
		return fmt.Errorf("local_out %s: %s: refused, nothing done on the host (partial results go only into the run's own --out)", fleet.Quote(local), why)
	}
	if out == "" || !filepath.IsAbs(out) || filepath.Clean(out) != out {
		return bad("the manifest names no absolute --out of the run")
	}
	rel, err := filepath.Rel(out, local)
	parts := strings.Split(rel, string(filepath.Separator))
	if err != nil || filepath.Clean(local) != local || len(parts) != 2 || (parts[0] != "hosts" && parts[0] != "baremetal") || parts[1] == ".." || parts[1] == "." {
		return bad("not a folder " + filepath.Join(out, "hosts", "NAME") + " (or baremetal/NAME) of the run's --out " + out)
	}
	for _, p := range []string{out, filepath.Join(out, parts[0]), local} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return bad(p + " is a symbolic link")
		}
	}
	return nil
}

// reconnect dials a manifest object's host as the run did: the name the user gave (ssh_config's
// alias applies again), the run's key file, a VM's own known_hosts. A host only a manifest names
// is never trusted on first use, and its failures carry no advice to trust it.
func reconnect(ctx context.Context, o fleet.Object, opts Options) (*gossh.Client, Target, error) {
	opts.AcceptNew, opts.fromManifest = false, true
	t, err := ParseAddress(o.Host)
	if err != nil {
		return nil, t, err
	}
	if o.Via != "" {
		t.Name = o.Via
	}
	if o.Identity != "" {
		t.IdentityFiles = []string{o.Identity}
	}
	if o.KnownHosts != "" { // a VM's key, trusted by the run that made it: not in the user's files
		opts.KnownHosts, opts.ConfigFile = []string{o.KnownHosts}, "/dev/null"
	}
	t, err = Resolve(t, opts)
	if err != nil {
		return nil, t, err
	}
	c, err := Dial(ctx, t, opts)
	return c, t, err
}

// collectPartial copies the run folder's out/ into local, when there is one.
func collectPartial(ctx context.Context, c *gossh.Client, dir, local string) error {
	if _, err := output(ctx, c, "test -d "+quote(dir+"/out")); err != nil {
		return nil // nothing measured yet
	}
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	return collect(ctx, c, dir+"/out", local)
}
