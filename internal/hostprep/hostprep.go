// Package hostprep prepares a host for a real run and leaves its OS as it found it: what the run
// needs and the host lacks (the NVIDIA driver, DCGM, numactl) is installed with apt before the run
// and purged after it. Only what this run installed is removed; what the host had is used and never
// touched (a DCGM engine already running included). Every package is written to the run manifest
// before it is installed, so `gpuvet clean` finishes an interrupted cleanup. A host that cannot be
// prepared (no root, no apt, no repository offering the package, an install that would upgrade or
// remove a package the host has, allow_* off) fails before anything there changes.
//
// It talks to the host through one seam, a Runner (a shell script in, its stdout out): the ssh
// backend's is an SSH session.
package hostprep

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Runner and Recorder are the fleet layer's seams: a shell script run on the host, and the run
// manifest an object is recorded in before it is made.
type (
	Runner   = fleet.ShellRunner
	Recorder = fleet.Recorder
)

// Manifest kinds of what host preparation adds.
const (
	// KindPackage is one apt package this run installed (Name: package=version): purged after.
	KindPackage = "apt-package"
	// KindAutoremove is recorded when the host had nothing autoremovable before the install:
	// `apt-get autoremove --purge` runs after the purge (never on a host that had something).
	KindAutoremove = "apt-autoremove"
	// KindEngine is the DCGM host engine (nv-hostengine) this run started: stopped after.
	KindEngine = "dcgm-hostengine"
)

// Kinds are the manifest kinds `gpuvet clean` hands to Clean.
var Kinds = []string{KindPackage, KindAutoremove, KindEngine}

// Need is one tool the run needs on the host and the package that provides it.
type Need struct {
	What     string            // "the NVIDIA driver"
	Binary   string            // found on PATH: the host has it (nvidia-smi)
	Pkg      config.AptPackage // installed when it is missing
	Allow    bool              // may it be installed?
	AllowKey string            // the config key that allows it (host_prep.allow_driver_install)
	PkgKey   string            // the config key naming the package (host_prep.driver)
	Hint     string            // where the package comes from, for the error when no repository has it
}

// Plan is what every host of a run needs; it also keeps each host's record for the summary.
type Plan struct {
	Needs []Need
	// Engine: DCGM's diagnostic needs nv-hostengine running; started when it is not (and stopped after).
	Engine bool
	// VFIORelease: the hosts are virtualization nodes whose GPUs are released from vfio-pci for the
	// run and restored after (internal/vfio, driven by the backend).
	VFIORelease bool

	mu      sync.Mutex
	records map[string]*results.HostPrep
}

// NVIDIA's CUDA repository, where the driver and DCGM packages come from.
const nvidiaRepo = "NVIDIA's CUDA repository (install its cuda-keyring package: https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/cuda-keyring_1.1-1_all.deb, e.g. distro debian12 or ubuntu2404, arch x86_64 or sbsa; then apt-get update)"

// FromConfig is the plan of a run's hosts; nil when host preparation is off (host_prep.enabled,
// or auto with hosts that run the simulator).
func FromConfig(c config.Config) *Plan {
	h := c.HostPrep
	if !h.On(c.SSH.RemoteBackend) {
		return nil
	}
	p := &Plan{records: map[string]*results.HostPrep{}, VFIORelease: h.VFIORelease}
	p.Needs = append(p.Needs, Need{What: "the NVIDIA driver", Binary: "nvidia-smi", Pkg: h.Driver, Allow: h.AllowDriverInstall,
		AllowKey: "host_prep.allow_driver_install", PkgKey: "host_prep.driver", Hint: nvidiaRepo})
	if c.Health.Enabled && c.Health.DCGM.Enabled {
		p.Needs = append(p.Needs, Need{What: "DCGM (dcgmi)", Binary: "dcgmi", Pkg: h.DCGM, Allow: c.Health.DCGM.AllowInstall,
			AllowKey: "health.dcgm.allow_install", PkgKey: "host_prep.dcgm", Hint: nvidiaRepo + ", or set health.dcgm.enabled=false"})
		p.Engine = true
	}
	if c.Engine.NUMABind {
		p.Needs = append(p.Needs, Need{What: "numactl", Binary: "numactl", Pkg: h.Numactl, Allow: h.AllowNumactlInstall,
			AllowKey: "host_prep.allow_numactl_install", PkgKey: "host_prep.numactl", Hint: "the distribution's main repository, or set engine.numa_bind=false"})
	}
	return p
}

// ForNode is the plan of a virtualization node's bare-metal run (opennebula.baremetal): the node
// runs the local backend and its GPUs are released from vfio-pci; nil when host_prep.enabled is false.
func ForNode(c config.Config) *Plan {
	c.SSH.RemoteBackend = "local"
	c.HostPrep.VFIORelease = true
	return FromConfig(c)
}

// Record is the host's record (nil when it was not prepared).
func (p *Plan) Record(host string) *results.HostPrep {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records[host]
}

// Refused records why a host's preparation never began (its GPUs could not be released from
// vfio-pci, say), with what was done before: the host's entry says so instead of saying nothing.
func (p *Plan) Refused(host string, err error, vfio []string) {
	p.keep(host, &results.HostPrep{Error: err.Error(), VFIO: vfio})
}

func (p *Plan) keep(host string, r *results.HostPrep) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records[host] = r
}

// Session is one host's preparation: End undoes it.
type Session struct {
	r     Runner
	rec   Recorder
	base  fleet.Object
	say   func(string)
	Rec   *results.HostPrep
	objs  []fleet.Object // recorded, in order
	sudo  bool           // scripts run through sudo -n
	runID string
}

// Begin prepares the host: it finds what is missing, checks that all of it can be installed (root,
// apt, each package at its pin in a repository, an install that only adds), records every package
// in the manifest, installs them and checks the tools work. base is the manifest object the host's
// objects are made from (how clean reconnects). An error before the install changed nothing; after
// it, End undoes what was done.
func (p *Plan) Begin(ctx context.Context, r Runner, rec Recorder, base fleet.Object, name, runID string, say func(string)) (*Session, error) {
	s := &Session{r: r, rec: rec, base: base, say: say, runID: runID, Rec: &results.HostPrep{}}
	p.keep(name, s.Rec)
	err := checkRunID(runID)
	if err == nil {
		err = s.begin(ctx, p)
	}
	if err != nil {
		s.Rec.Error = err.Error()
	}
	return s, err
}

func (s *Session) begin(ctx context.Context, p *Plan) error {
	pr, err := probe(ctx, s.r, p.Needs)
	if err != nil {
		return fmt.Errorf("host preparation: %w (nothing changed on the host)", err)
	}
	if !pr.root {
		if !pr.sudo {
			return fmt.Errorf("host preparation needs root (to install %s): log in as root, or give the user passwordless sudo; or turn it off with host_prep.enabled=false and install them yourself (nothing changed on the host)", strings.Join(pr.missingNames(p.Needs), ", "))
		}
		s.r, s.sudo = sudo{s.r}, true
	}
	var missing []Need
	for _, n := range p.Needs {
		switch {
		case pr.bins[n.Binary]:
			s.Rec.Used = append(s.Rec.Used, n.Binary)
		case pr.pkgs[n.Pkg.Package] != "":
			return fmt.Errorf("%s: package %s is installed (%s) but %s is not on the PATH: repair it by hand (gpuvet never touches a package it did not install) (nothing changed on the host)", n.What, n.Pkg.Package, pr.pkgs[n.Pkg.Package], n.Binary)
		case !n.Allow:
			return fmt.Errorf("%s is missing (no %s) and %s is false: install %s yourself, or allow it (nothing changed on the host)", n.What, n.Binary, n.AllowKey, n.Pkg.Package)
		default:
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		if err := s.install(ctx, missing, pr); err != nil {
			return err
		}
	}
	if p.Engine {
		return s.engine(ctx, pr)
	}
	return nil
}

// install checks, records, installs and verifies the missing packages.
func (s *Session) install(ctx context.Context, missing []Need, pr *probed) error {
	if !pr.apt {
		return fmt.Errorf("%s missing and the host has no apt-get: gpuvet installs with apt (Debian, Ubuntu) only; install %s yourself (nothing changed on the host)", names(missing), pkgList(missing, false))
	}
	// The repository must offer each package at its pin: refresh the lists only when they do not.
	if bad := s.unavailable(ctx, missing); len(bad) > 0 {
		s.say("apt-get update (the package lists do not offer " + strings.Join(bad, ", ") + ")")
		if _, err := s.r.Run(ctx, aptEnv+"apt-get update -q"); err != nil {
			return fmt.Errorf("apt-get update: %w (nothing installed)", err)
		}
		for _, n := range missing {
			if msg := s.availability(ctx, n); msg != "" {
				return fmt.Errorf("%s (nothing installed)", msg)
			}
		}
	}
	specs := pkgList(missing, true)
	sim, err := s.r.Run(ctx, aptEnv+"apt-get -s -y install "+specs)
	if err != nil {
		return fmt.Errorf("apt-get install %s would fail: %w (nothing installed)", specs, err)
	}
	add, changed := parseSimulation(sim)
	if len(changed) > 0 {
		return fmt.Errorf("installing %s would change packages the host already has (%s): gpuvet never changes what it did not install; install them yourself or pin host_prep versions that fit (nothing installed)", specs, strings.Join(changed, ", "))
	}
	// The manifest first: a run killed mid-install leaves every package it may have added listed.
	if pr.autoremovable == 0 {
		if err := s.record(KindAutoremove, "autoremove"); err != nil {
			return err
		}
	} else if pr.autoremovable < 0 {
		s.Rec.Autoremove = "not run: whether the host had autoremovable packages before this run could not be read (apt-get -s autoremove)"
	} else {
		s.Rec.Autoremove = fmt.Sprintf("not run: the host had %d autoremovable package(s) before this run (they are the host's)", pr.autoremovable)
	}
	for _, a := range add {
		if err := s.record(KindPackage, a); err != nil {
			return err
		}
	}
	// The host's own record of what this run adds: `gpuvet clean` undoes only what is in both it and
	// the manifest (a manifest is a file anyone may have edited).
	if _, err := s.r.Run(ctx, fmt.Sprintf("mkdir -p %s && printf '%%s\n' %s > %s", stateDir, fleet.ShellWords(fleet.RecordLines(s.objs)), quote(hostRecord(s.runID)))); err != nil {
		return fmt.Errorf("write %s: %w (nothing installed)", hostRecord(s.runID), err)
	}
	s.say("apt-get install " + specs + " (" + strconv.Itoa(len(add)) + " package(s): " + strings.Join(add, " ") + ")")
	out, err := s.r.Run(ctx, aptEnv+"apt-get install -y -q "+aptLock+specs)
	if err != nil {
		return fmt.Errorf("apt-get install %s: %w; last output: %s", specs, err, lastLines(out, 3))
	}
	s.Rec.Installed = append(s.Rec.Installed, add...)
	for _, n := range missing {
		if err := s.verify(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// verify checks that an installed tool runs; a driver whose module is not loaded yet is loaded.
func (s *Session) verify(ctx context.Context, n Need) error {
	check := cmp.Or(map[string]string{
		"nvidia-smi": "nvidia-smi -L >/dev/null 2>&1 || { modprobe nvidia 2>/dev/null; nvidia-smi -L; }",
		"dcgmi":      "command -v dcgmi && command -v nv-hostengine",
		"numactl":    "numactl --hardware",
	}[n.Binary], "command -v "+quote(n.Binary))
	if _, err := s.r.Run(ctx, check); err != nil {
		return fmt.Errorf("%s: installed %s, but %s does not work: %w (a new driver may need a reboot: nouveau loaded, Secure Boot refusing the module); it is purged again", n.What, n.Pkg.Spec(), n.Binary, err)
	}
	return nil
}

// engine starts nv-hostengine when DCGM is there and no engine runs (a running one is used as it is).
func (s *Session) engine(ctx context.Context, pr *probed) error {
	if pr.engine {
		s.Rec.Used = append(s.Rec.Used, "running nv-hostengine")
		return nil
	}
	if out, _ := s.r.Run(ctx, "pgrep -x nv-hostengine >/dev/null && echo running"); strings.TrimSpace(out) == "running" {
		// Started by the DCGM package this run installed: purging it stops it.
		return nil
	}
	if err := s.record(KindEngine, "nv-hostengine"); err != nil {
		return err
	}
	if _, err := s.r.Run(ctx, fmt.Sprintf("mkdir -p %s && echo %s >> %s", stateDir, quote(s.objs[len(s.objs)-1].RecordLine()), quote(hostRecord(s.runID)))); err != nil {
		return fmt.Errorf("write %s: %w (nv-hostengine not started)", hostRecord(s.runID), err)
	}
	s.say("start nv-hostengine (DCGM's host engine)")
	if _, err := s.r.Run(ctx, "nv-hostengine >/dev/null && sleep 0.5 && pgrep -x nv-hostengine >/dev/null"); err != nil {
		return fmt.Errorf("DCGM: nv-hostengine did not start: %w", err)
	}
	s.Rec.Started = append(s.Rec.Started, "nv-hostengine")
	return nil
}

func (s *Session) record(kind, name string) error {
	return fleet.RecordOn(s.rec, &s.objs, s.base, kind, name, "not installed")
}

// End undoes what Begin did: it stops the engine it started, purges the packages it installed
// (only those), runs autoremove when the host had nothing autoremovable before, and checks that
// nothing is left. r is the connection to use (nil: Begin's). Safe to call twice, and after a
// failed Begin.
func (s *Session) End(ctx context.Context, r Runner) error {
	if r != nil {
		s.r = r
		if s.sudo {
			s.r = sudo{r}
		}
	}
	if len(s.objs) == 0 {
		return nil
	}
	res, err := undo(ctx, s.r, s.runID, s.objs, s.say)
	s.Rec.Removed = append(s.Rec.Removed, res.removed...)
	if res.autoremove != "" {
		s.Rec.Autoremove = res.autoremove
	}
	s.Rec.Left = res.left
	s.objs = fleet.MarkDone(s.rec, s.objs, res.done) // a second End retries only what is left
	return err
}

// Clean finishes what a killed run left on one host: the manifest objects of the Kinds given
// (they all name that host). It returns the ones that are gone.
func Clean(ctx context.Context, r Runner, runID string, objs []fleet.Object, say func(string)) ([]fleet.Object, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	if out, err := r.Run(ctx, "id -u"); err == nil && strings.TrimSpace(out) != "0" {
		r = sudo{r}
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].CreatedAt.Before(objs[j].CreatedAt) })
	res, err := undo(ctx, r, runID, objs, say)
	return res.done, err
}

// stateDir holds the hosts' own records of what each run added (hostRecord), removed with the last.
const stateDir = "/var/lib/gpuvet"

func hostRecord(runID string) string { return stateDir + "/hostprep-" + runID }

// checkRunID refuses a run id that is not one gpuvet makes (it names a file on the host).
func checkRunID(id string) error {
	if id == "" || strings.Trim(id, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_") != "" {
		return fmt.Errorf("host preparation: run id %q is not one gpuvet makes", id)
	}
	return nil
}

// vouched keeps the objects the host's own record of run runID lists; the others are refused. No
// record: the run never got to install anything (it writes the record first), nothing to undo.
func vouched(ctx context.Context, r Runner, runID string, objs []fleet.Object) (keep, none, refused []fleet.Object, err error) {
	out, err := r.Run(ctx, fmt.Sprintf("f=%s; if [ -f \"$f\" ]; then echo present; cat \"$f\"; fi", quote(hostRecord(runID))))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read %s: %w", hostRecord(runID), err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "present" {
		return nil, objs, nil, nil
	}
	for _, o := range objs {
		if slices.Contains(lines[1:], o.RecordLine()) {
			keep = append(keep, o)
		} else {
			refused = append(refused, o)
		}
	}
	return keep, nil, refused, nil
}

type undone struct {
	done       []fleet.Object
	removed    []string
	autoremove string
	left       []string
}

// undo reverses objs (in the order they were recorded): engine, then packages, then autoremove;
// only what the host's own record of the run lists too. The record goes with the last of them.
func undo(ctx context.Context, r Runner, runID string, objs []fleet.Object, say func(string)) (undone, error) {
	var u undone
	keep, none, refused, err := vouched(ctx, r, runID, objs)
	if err != nil {
		return u, err
	}
	if len(none) > 0 {
		say(fmt.Sprintf("no host record of run %s: it installed nothing, nothing to undo", runID))
		u.done = append(u.done, none...)
	}
	var errs []string
	for _, o := range refused {
		errs = append(errs, fmt.Sprintf("%s %s is not in the host's record of run %s (%s): not gpuvet's, left alone", o.Kind, o.Name, runID, hostRecord(runID)))
		u.left = append(u.left, o.RecordLine())
	}
	var pkgs, engines, auto []fleet.Object
	purgeLeft := false
	for _, o := range keep {
		switch o.Kind {
		case KindPackage:
			pkgs = append(pkgs, o)
		case KindEngine:
			engines = append(engines, o)
		case KindAutoremove:
			auto = append(auto, o)
		}
	}
	for _, o := range engines {
		if _, err := r.Run(ctx, stopEngine); err != nil {
			errs = append(errs, "nv-hostengine still runs: "+err.Error())
			u.left = append(u.left, "process nv-hostengine")
			continue
		}
		say("stopped nv-hostengine")
		u.removed = append(u.removed, "process nv-hostengine")
		u.done = append(u.done, o)
	}
	if len(pkgs) > 0 {
		names := make([]string, len(pkgs))
		for i, o := range pkgs {
			names[i], _, _ = strings.Cut(o.Name, "=")
		}
		say("apt-get purge " + strings.Join(names, " "))
		out, err := r.Run(ctx, fmt.Sprintf(purgeScript, fleet.ShellWords(names)))
		left := strings.Fields(out)
		for i, o := range pkgs {
			if slices.Contains(left, names[i]) {
				u.left = append(u.left, "package "+o.Name)
				purgeLeft = true
				continue
			}
			u.removed = append(u.removed, o.Name)
			u.done = append(u.done, o)
		}
		if err != nil || len(left) > 0 {
			errs = append(errs, fmt.Sprintf("apt-get purge left %s installed (%v)", strings.Join(left, " "), err))
		}
	}
	for _, o := range auto {
		if purgeLeft { // autoremove after a partial purge could take what is still in use
			u.left = append(u.left, "apt-get autoremove (after the purge)")
			break
		}
		out, err := r.Run(ctx, aptEnv+"apt-get autoremove --purge -y -q "+aptLock)
		if err != nil {
			errs = append(errs, "apt-get autoremove: "+err.Error())
			u.left = append(u.left, "apt-get autoremove")
			continue
		}
		n := strings.Count(out, "\nRemoving ") + strings.Count(out, "\nPurging ")
		if strings.HasPrefix(out, "Removing ") || strings.HasPrefix(out, "Purging ") {
			n++
		}
		u.autoremove = fmt.Sprintf("ran: the host had nothing autoremovable before this run (%d package(s) removed)", n)
		say("apt-get autoremove --purge")
		u.done = append(u.done, o)
	}
	if len(errs) == 0 && len(keep) > 0 {
		_, _ = r.Run(ctx, fmt.Sprintf("rm -f %s; rmdir %s 2>/dev/null; :", quote(hostRecord(runID)), stateDir))
	}
	if len(errs) > 0 {
		return u, fmt.Errorf("host preparation left %s on the host: %s; `gpuvet clean` retries from the run manifest", strings.Join(u.left, ", "), strings.Join(errs, "; "))
	}
	return u, nil
}

// aptEnv keeps apt quiet and non-interactive; aptLock waits for another apt (a run killed mid-install
// may still be finishing) rather than failing.
const (
	aptEnv  = "export DEBIAN_FRONTEND=noninteractive LC_ALL=C; "
	aptLock = "-o DPkg::Lock::Timeout=300 "
)

// purgeScript purges the packages given that are installed (finishing a dpkg run a kill cut short
// first) and prints those still installed after.
const purgeScript = aptEnv + `set -- %s
inst=""; for p; do s=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null); case "$s" in ""|un*|n*) ;; *) inst="$inst $p";; esac; done
if [ -n "$(dpkg --audit 2>/dev/null)" ]; then dpkg --configure -a >&2 || true; fi
rc=0; if [ -n "$inst" ]; then apt-get purge -y -q ` + aptLock + `$inst >&2 || rc=$?; fi
for p; do s=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null); case "$s" in ""|un*|n*) ;; *) echo "$p";; esac; done
exit $rc`

// stopEngine stops nv-hostengine (its own --term, then a signal) and checks it is gone.
const stopEngine = `pgrep -x nv-hostengine >/dev/null || exit 0
nv-hostengine --term >/dev/null 2>&1 || pkill -TERM -x nv-hostengine
i=0; while pgrep -x nv-hostengine >/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
! pgrep -x nv-hostengine >/dev/null`

// unavailable lists the missing packages the current package lists do not offer (at their pin).
func (s *Session) unavailable(ctx context.Context, missing []Need) []string {
	var bad []string
	for _, n := range missing {
		if s.availability(ctx, n) != "" {
			bad = append(bad, n.Pkg.Spec())
		}
	}
	return bad
}

// availability is "" when the repository offers the package at its pin, else what to do.
func (s *Session) availability(ctx context.Context, n Need) string {
	out, _ := s.r.Run(ctx, "LC_ALL=C apt-cache madison "+quote(n.Pkg.Package)+" 2>/dev/null")
	var versions []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "|")
		if len(f) >= 2 && strings.TrimSpace(f[0]) == n.Pkg.Package {
			versions = append(versions, strings.TrimSpace(f[1]))
		}
	}
	switch {
	case len(versions) == 0:
		return fmt.Sprintf("%s is missing (no %s) and no apt repository of the host offers %s: add %s; or install it yourself, or set %s=false to fail instead",
			n.What, n.Binary, n.Pkg.Package, n.Hint, n.AllowKey)
	case n.Pkg.Version != "" && !slices.Contains(versions, n.Pkg.Version):
		return fmt.Sprintf("%s %s: the host's repositories offer %s, not %s: pin one of them with %s.version, or \"\" for the candidate",
			n.PkgKey, n.Pkg.Package, strings.Join(versions, ", "), n.Pkg.Version, n.PkgKey)
	}
	return ""
}

// parseSimulation reads `apt-get -s install`: the packages it adds (package=version) and the ones
// it would change (an upgrade, downgrade or removal of something the host has).
func parseSimulation(out string) (add, changed []string) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Inst":
			if len(f) >= 3 && strings.HasPrefix(f[2], "[") { // Inst pkg [old] (new …): an upgrade
				changed = append(changed, f[1]+" "+strings.Trim(f[2], "[]"))
				continue
			}
			v := ""
			if len(f) >= 3 && strings.HasPrefix(f[2], "(") {
				v = strings.TrimPrefix(f[2], "(")
			}
			if v != "" {
				add = append(add, f[1]+"="+v)
			} else {
				add = append(add, f[1])
			}
		case "Remv", "Purg":
			changed = append(changed, f[1]+" (removed)")
		}
	}
	return add, changed
}

// probed is what the host has, read before anything changes.
type probed struct {
	root, sudo, apt, engine bool
	bins                    map[string]bool
	pkgs                    map[string]string // package -> dpkg status when installed
	autoremovable           int
}

func (p *probed) missingNames(needs []Need) []string {
	var out []string
	for _, n := range needs {
		if !p.bins[n.Binary] {
			out = append(out, n.Pkg.Package)
		}
	}
	if len(out) == 0 {
		return []string{"nothing"}
	}
	return out
}

// probe reads the host: who we are, apt, the tools and packages, autoremovable packages, the engine.
func probe(ctx context.Context, r Runner, needs []Need) (*probed, error) {
	var b strings.Builder
	b.WriteString(`echo "uid=$(id -u)"
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then echo sudo=1; fi
command -v apt-get >/dev/null && echo apt=1
pgrep -x nv-hostengine >/dev/null 2>&1 && echo engine=1
if command -v apt-get >/dev/null && a=$(LC_ALL=C apt-get -s autoremove 2>/dev/null); then echo "autoremovable=$(printf '%s\n' "$a" | grep -c '^Remv ')"; fi
`)
	for _, n := range needs {
		fmt.Fprintf(&b, "command -v %s >/dev/null && echo bin.%s=1\n", quote(n.Binary), n.Binary)
		fmt.Fprintf(&b, "echo \"pkg.%s=$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' %s 2>/dev/null)\"\n", n.Pkg.Package, quote(n.Pkg.Package))
	}
	out, err := r.Run(ctx, b.String())
	if err != nil {
		return nil, fmt.Errorf("reading the host: %w", err)
	}
	p := &probed{bins: map[string]bool{}, pkgs: map[string]string{}, autoremovable: -1}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok {
			continue
		}
		switch {
		case k == "uid":
			p.root = v == "0"
		case k == "sudo":
			p.sudo = true
		case k == "apt":
			p.apt = true
		case k == "engine":
			p.engine = true
		case k == "autoremovable":
			// Unreadable stays unknown (-1): only a host known to have none gets autoremove after.
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				p.autoremovable = n
			}
		case strings.HasPrefix(k, "bin."):
			p.bins[strings.TrimPrefix(k, "bin.")] = true
		case strings.HasPrefix(k, "pkg."):
			// "ii 580…" installed; "rc" config files only, "un"/"" not installed.
			if len(v) >= 2 && v[0] != 'u' && v[0] != 'n' && v[:2] != "rc" {
				p.pkgs[strings.TrimPrefix(k, "pkg.")] = v
			}
		}
	}
	return p, nil
}

// sudo runs every script through passwordless sudo.
type sudo struct{ r Runner }

func (s sudo) Run(ctx context.Context, script string) (string, error) {
	return s.r.Run(ctx, "sudo -n sh -c "+quote(script))
}

func names(ns []Need) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.What)
	}
	return strings.Join(out, ", ")
}

func pkgList(ns []Need, quoted bool) string {
	var out []string
	for _, n := range ns {
		w := n.Pkg.Spec()
		if quoted {
			w = quote(w)
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], " | ")
}

var quote = fleet.ShellQuote
