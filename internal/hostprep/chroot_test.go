package hostprep_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/dcgm"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/hostprep/hostpreptest"
	"github.com/gpuvet/gpuvet/internal/ssh"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

// lab is one real Debian host (hostpreptest) reached over real SSH, and a run manifest.
type lab struct {
	host *hostpreptest.Host
	c    *gossh.Client
	m    *fleet.Manifest
	base fleet.Object
	dir  string
}

func newLab(t *testing.T, addr, user string) *lab {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	pub, err := sshtest.NewKey(key)
	if err != nil {
		t.Fatal(err)
	}
	h := hostpreptest.New(t, addr, hostpreptest.Options{Authorized: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub)))})
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, []byte(h.SSHD.KnownHostsLines()), 0o600)
	tg := ssh.Target{Name: addr, Host: addr, Port: h.SSHD.Port, User: user, IdentityFiles: []string{key}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ssh.Dial(ctx, tg, ssh.Options{KnownHosts: []string{kh}, ConfigFile: "/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := fleet.NewManifest(filepath.Join(dir, "state"), "ssh", "testrun", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &lab{host: h, c: c, m: m, base: fleet.Object{Host: ssh.Address(tg), Via: addr}, dir: dir}
}

// plan is a run's plan with the sets given, for hosts that run the local backend.
func plan(t *testing.T, sets ...string) *hostprep.Plan {
	t.Helper()
	p, err := config.Load(config.Options{Sets: append([]string{"backend=ssh", "ssh.hosts=h", "ssh.remote_backend=local"}, sets...)})
	if err != nil {
		t.Fatal(err)
	}
	hp := hostprep.FromConfig(p.Config)
	if hp == nil {
		t.Fatal("host preparation is off for a local-backend ssh plan")
	}
	return hp
}

func (l *lab) begin(t *testing.T, p *hostprep.Plan) (*hostprep.Session, error, []string) {
	t.Helper()
	var said []string
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := p.Begin(ctx, ssh.Runner{C: l.c}, l.m, l.base, "h", "testrun", func(s string) { said = append(said, s) })
	return s, err, said
}

func (l *lab) end(t *testing.T, s *hostprep.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.End(ctx, nil); err != nil {
		t.Fatalf("End: %v", err)
	}
}

// A bare host gets the driver, DCGM (with its engine) and numactl, every package in the manifest
// before it is installed; the tools work; after the run everything this run added is gone, and
// autoremove ran because the host had nothing autoremovable.
func TestChrootBareHostInstallUsePurge(t *testing.T) {
	l := newLab(t, "127.0.0.40", "root")
	before := l.host.Installed(t)
	s, err, said := l.begin(t, plan(t))
	if err != nil {
		t.Fatalf("Begin: %v\n%s", err, strings.Join(said, "\n"))
	}
	after := l.host.Installed(t)
	want := map[string]string{"nvidia-open": "580.159.04-1", "nvidia-driver-cuda": "580.159.04-1", "nvidia-kernel-open-dkms": "580.159.04-1",
		"datacenter-gpu-manager-4-cuda13": "1:4.4.1-1", "datacenter-gpu-manager-4-core": "1:4.4.1-1", "numactl": "2.0.16-1", "libnuma1": "2.0.16-1"}
	var added []string
	for p, v := range after {
		if _, ok := before[p]; !ok {
			added = append(added, p+"="+v)
		}
	}
	slices.Sort(added)
	var wantAdded []string
	for p, v := range want {
		wantAdded = append(wantAdded, p+"="+v)
	}
	slices.Sort(wantAdded)
	if !slices.Equal(added, wantAdded) {
		t.Fatalf("installed %v, want %v", added, wantAdded)
	}
	got := slices.Clone(s.Rec.Installed)
	slices.Sort(got)
	if !slices.Equal(got, wantAdded) {
		t.Fatalf("record says installed %v, want %v", got, wantAdded)
	}
	// Every package is in the manifest (what `gpuvet clean` reads), and the autoremove permission.
	rm, err := fleet.ReadManifest(l.m.Path())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range rm.Objects {
		kinds = append(kinds, o.Kind+" "+o.Name)
	}
	for _, a := range wantAdded {
		if !slices.Contains(kinds, hostprep.KindPackage+" "+a) {
			t.Fatalf("manifest lacks %s: %v", a, kinds)
		}
	}
	if !slices.Contains(kinds, hostprep.KindAutoremove+" autoremove") || !slices.Contains(kinds, hostprep.KindEngine+" nv-hostengine") {
		t.Fatalf("manifest lacks the autoremove permission or the engine: %v", kinds)
	}
	// Use: the tools work over the same connection a run uses; DCGM's diagnostic parses as DCGM 4.
	out := l.host.Exec(t, "nvidia-smi -L && numactl --hardware | head -1 && dcgmi diag -r 2 -j")
	if !strings.Contains(out, "NVIDIA H200") || !strings.Contains(out, "available:") {
		t.Fatalf("tools: %s", out)
	}
	tests, version, err := dcgm.Parse([]byte(out[strings.Index(out, "{"):]))
	if err != nil || len(tests) == 0 || !strings.HasPrefix(version, "4") {
		t.Fatalf("dcgmi diag through the installed DCGM: %v %d tests version %q", err, len(tests), version)
	}
	if len(l.host.Procs("nv-hostengine")) != 1 {
		t.Fatalf("nv-hostengine not running once: %v", l.host.Procs("nv-hostengine"))
	}
	l.end(t, s)
	if final := l.host.Installed(t); !maps.Equal(final, before) {
		t.Fatalf("after cleanup the host's packages differ from before:\nbefore %v\nafter %v", before, final)
	}
	if p := l.host.Procs("nv-hostengine"); len(p) != 0 {
		t.Fatalf("nv-hostengine still runs: %v", p)
	}
	if out, err := l.host.Try("command -v nvidia-smi dcgmi numactl"); err == nil {
		t.Fatalf("tools left: %s", out)
	}
	if !strings.HasPrefix(s.Rec.Autoremove, "ran") || len(s.Rec.Removed) != len(wantAdded)+1 || len(s.Rec.Left) != 0 {
		t.Fatalf("record after cleanup: %+v", s.Rec)
	}
	if live := l.m.Live(); len(live) != 0 {
		t.Fatalf("manifest still lists %v", live)
	}
	if log := l.host.Exec(t, "cat /var/log/gpuvet-standin.log"); !strings.Contains(log, "nvidia-open configure") {
		t.Fatalf("the stand-ins' maintainer scripts did not run: %s", log)
	}
}

// What the host had is used and never touched: numactl and DCGM installed, its engine running, and
// an autoremovable package of its own; only the driver is added, autoremove does not run.
func TestChrootPreinstalledUntouchedAndAutoremoveRule(t *testing.T) {
	l := newLab(t, "127.0.0.41", "root")
	l.host.Exec(t, "apt-get install -y -q numactl datacenter-gpu-manager-4-cuda13 gpuvet-standin-orphan && apt-mark auto gpuvet-standin-orphan && nv-hostengine")
	engine := l.host.Procs("nv-hostengine")
	if len(engine) != 1 {
		t.Fatalf("the host's own engine: %v", engine)
	}
	if out := l.host.Exec(t, "apt-get -s autoremove | grep -c '^Remv '"); strings.TrimSpace(out) != "1" {
		t.Fatalf("the host should have one autoremovable package: %s", out)
	}
	before := l.host.Installed(t)
	s, err, said := l.begin(t, plan(t))
	if err != nil {
		t.Fatalf("Begin: %v\n%s", err, strings.Join(said, "\n"))
	}
	got := slices.Clone(s.Rec.Installed)
	slices.Sort(got)
	if want := []string{"nvidia-driver-cuda=580.159.04-1", "nvidia-kernel-open-dkms=580.159.04-1", "nvidia-open=580.159.04-1"}; !slices.Equal(got, want) {
		t.Fatalf("installed %v, want only the driver %v", got, want)
	}
	for _, u := range []string{"dcgmi", "numactl", "running nv-hostengine"} {
		if !slices.Contains(s.Rec.Used, u) {
			t.Fatalf("record does not say %q was used: %+v", u, s.Rec)
		}
	}
	for _, o := range l.m.Live() {
		if o.Kind == hostprep.KindAutoremove || o.Kind == hostprep.KindEngine || strings.HasPrefix(o.Name, "numactl") || strings.HasPrefix(o.Name, "datacenter") {
			t.Fatalf("manifest lists something of the host's: %v", o)
		}
	}
	l.end(t, s)
	if final := l.host.Installed(t); !maps.Equal(final, before) {
		t.Fatalf("after cleanup the host's packages differ from before:\nbefore %v\nafter %v", before, final)
	}
	if p := l.host.Procs("nv-hostengine"); !slices.Equal(p, engine) {
		t.Fatalf("the host's own nv-hostengine was touched: %v, was %v", p, engine)
	}
	if !strings.HasPrefix(s.Rec.Autoremove, "not run: the host had 1 autoremovable") {
		t.Fatalf("autoremove: %q", s.Rec.Autoremove)
	}
}

// A host that cannot be prepared fails before anything changes, saying what to do: allow_* off,
// a pin the repository lacks, no repository offering the package, no root.
func TestChrootCannotInstallChangesNothing(t *testing.T) {
	l := newLab(t, "127.0.0.42", "root")
	// A user without root or sudo; sshd reads the test key's authorized_keys as that user.
	l.host.Exec(t, "useradd -m -s /bin/sh -p '*' tester && chmod 755 /tmp/sshd-* && chmod 644 /tmp/sshd-*/authorized_keys")
	cases := []struct {
		name string
		plan *hostprep.Plan
		prep string // in the host, before
		want string
	}{
		{"driver not allowed", plan(t, "host_prep.allow_driver_install=false"), "", "host_prep.allow_driver_install is false"},
		{"dcgm not allowed", plan(t, "health.dcgm.allow_install=false"), "", "health.dcgm.allow_install is false"},
		{"pin not offered", plan(t, "host_prep.driver.version=575.57.08-1"), "", "offer 580.159.04-1, not 575.57.08-1"},
		{"no repository", plan(t), "mv /etc/apt/sources.list.d/gpuvet-standin.list /root/ && apt-get update -q",
			"no apt repository of the host offers nvidia-open: add NVIDIA's CUDA repository (install its cuda-keyring"},
	}
	before := l.host.Installed(t)
	for _, c := range cases {
		if c.prep != "" {
			l.host.Exec(t, c.prep)
		}
		_, err, _ := l.begin(t, c.plan)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing") {
			t.Fatalf("%s: %v, want an error saying %q and that nothing changed", c.name, err, c.want)
		}
		if now := l.host.Installed(t); !maps.Equal(now, before) {
			t.Fatalf("%s: packages changed", c.name)
		}
		if live := l.m.Live(); len(live) != 0 {
			t.Fatalf("%s: manifest lists %v", c.name, live)
		}
	}
	u := newLabOn(t, l, "tester")
	_, err, _ := u.begin(t, plan(t))
	if err == nil || !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("non-root: %v", err)
	}
}

// newLabOn logs in to l's host as another user.
func newLabOn(t *testing.T, l *lab, user string) *lab {
	t.Helper()
	kh := filepath.Join(l.dir, "known_hosts")
	tg := ssh.Target{Name: l.host.SSHD.Host, Host: l.host.SSHD.Host, Port: l.host.SSHD.Port, User: user, IdentityFiles: []string{filepath.Join(l.dir, "id_ed25519")}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ssh.Dial(ctx, tg, ssh.Options{KnownHosts: []string{kh}, ConfigFile: "/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lab{host: l.host, c: c, m: l.m, base: l.base, dir: l.dir}
}

// gpuvet clean trusts nothing it reads: a package an edited manifest names, which the host's own
// record of the run does not, is left alone (and said); what the run did install is purged.
func TestChrootCleanRefusesWhatTheRunDidNotInstall(t *testing.T) {
	l := newLab(t, "127.0.0.43", "root")
	s, err, said := l.begin(t, plan(t, "health.dcgm.enabled=false", "engine.numa_bind=false"))
	if err != nil {
		t.Fatalf("Begin: %v\n%s", err, strings.Join(said, "\n"))
	}
	_ = s
	objs := l.m.Live()
	forged := objs[0]
	forged.Name = "openssh-server"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done, err := hostprep.Clean(ctx, ssh.Runner{C: l.c}, "testrun", append(objs, forged), func(string) {})
	if err == nil || !strings.Contains(err.Error(), "apt-package openssh-server is not in the host's record of run testrun") {
		t.Fatalf("Clean: %v", err)
	}
	if len(done) != len(objs) {
		t.Fatalf("undone %d of the run's %d objects", len(done), len(objs))
	}
	inst := l.host.Installed(t)
	if _, ok := inst["openssh-server"]; !ok {
		t.Fatal("clean purged openssh-server, which the run never installed")
	}
	if _, ok := inst["nvidia-open"]; ok {
		t.Fatal("clean left the driver the run installed")
	}
	// A run that never got to install anything (no host record) has nothing to undo.
	done, err = hostprep.Clean(ctx, ssh.Runner{C: l.c}, "otherrun", []fleet.Object{forged}, func(string) {})
	if err != nil || len(done) != 1 {
		t.Fatalf("no record: %v %v", done, err)
	}
	if _, ok := l.host.Installed(t)["openssh-server"]; !ok {
		t.Fatal("openssh-server purged")
	}
}
