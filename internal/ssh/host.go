package ssh

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
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

	client *gossh.Client
	obj    fleet.Object
	made   bool
}

// Name is the host as the user named it.
func (h *Host) Name() string { return h.Target.Name }

// Provision connects and prepares the remote folder.
func (h *Host) Provision(ctx context.Context) error {
	c, err := Dial(ctx, h.Target, h.Options)
	if err != nil {
		return err
	}
	h.client = c
	h.obj = fleet.Object{Kind: ObjectKind, Name: h.Job.RemoteDir, Host: Address(h.Target)}
	if h.Manifest != nil {
		if err := h.Manifest.Record(h.obj); err != nil {
			return fmt.Errorf("run manifest: %v (nothing created on the host)", err)
		}
	}
	h.made = true
	return Prepare(ctx, c, h.Job)
}

// Run runs gpuvet on the host and returns its summary (partial when the run broke).
func (h *Host) Run(ctx context.Context) (*results.Summary, error) {
	out, err := Execute(ctx, h.client, h.Job)
	return out.Summary, err
}

// Cleanup removes the remote folder (safe to run twice) and closes the connection.
func (h *Host) Cleanup(ctx context.Context) error {
	if h.client == nil {
		return nil
	}
	defer h.client.Close()
	if !h.made {
		return nil
	}
	if err := Remove(ctx, h.client, h.Job.RemoteDir); err != nil {
		return err
	}
	if h.Manifest != nil {
		return h.Manifest.Deleted(h.obj)
	}
	return nil
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

// Clean removes what a killed run left on one host: the manifest's ssh-dir objects.
func Clean(ctx context.Context, o fleet.Object, opts Options) error {
	t, err := ParseAddress(o.Host)
	if err != nil {
		return err
	}
	t, err = Resolve(t, opts)
	if err != nil {
		return err
	}
	c, err := Dial(ctx, t, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	return Remove(ctx, c, o.Name)
}
