package ssh

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/vfio"
)

// Backend ssh as the registry names it: how `gpuvet run` opens it and how `gpuvet clean` removes
// what its killed runs left.

// Flags adds backend ssh's `gpuvet run` flags (the backend table maps each to its key).
func Flags(fl *pflag.FlagSet) {
	fl.String("hosts", "", "backend ssh: the hosts to vet, comma-separated (ssh_config aliases, names or addresses)")
	fl.String("inventory", "", "backend ssh: a YAML inventory of hosts (per-host user, port, identity_file, gpus, set)")
}

// Open opens backend ssh from the plan (its hosts are checked when it lists them); close releases
// nothing.
func Open(plan *config.Plan) (fleet.Backend, func(), error) {
	return Fleet{Config: plan.Config.SSH, Env: SecretsFromEnv(), Prep: hostprep.FromConfig(plan.Config)}, func() {}, nil
}

// Cleaner removes every object an ssh run's manifest still lists: run folders first (their
// partial results are collected), then what host preparation changed.
var Cleaner = fleet.ObjectCleaner(Removers)

// Removers are the removers of what an ssh run leaves (opennebula adds its VMs to them): the run
// folder, and every kind of host preparation and of a node's vfio release.
func Removers() fleet.Removers {
	rs := fleet.Removers{ByKind: map[string]fleet.Remover{
		ObjectKind: func(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, say func(string)) error {
			ctx, cancel := context.WithTimeout(ctx, cleanTimeout)
			defer cancel()
			return Clean(ctx, o, m.RunID, m.Target["output"], OptionsFrom(plan.Config.SSH), say)
		},
	}, First: []string{ObjectKind}}
	prep := prepRemover()
	for _, k := range prepKinds {
		rs.ByKind[k] = prep
	}
	return rs
}

// cleanTimeout bounds `gpuvet clean`'s removal of one run folder (reconnect, stop a run still
// going, collect its partial results, remove), prepCleanTimeout one host's undoing of its
// preparation (the vfio restore, a driver's purge: minutes of DKMS), as a run's cleanup is
// (Fleet.CleanupTimeout): clean itself has no deadline, and a host whose commands hang must not
// hold it forever.
var cleanTimeout, prepCleanTimeout = 5 * time.Minute, 20 * time.Minute

// prepKinds are the manifest kinds of host preparation and of a node's vfio release.
var prepKinds = append(slices.Clone(hostprep.Kinds), vfio.Kinds...)

// prepRemover undoes host preparation's leftovers (packages, the DCGM engine, GPUs released from
// vfio-pci): one host's together and in order (vfio binding, engine, packages, autoremove), once,
// by whichever of its objects clean reaches first. Its locks are this clean's.
func prepRemover() fleet.Remover {
	var locks sync.Map // manifest path + host -> *sync.Mutex
	return func(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, say func(string)) error {
		mu, _ := locks.LoadOrStore(m.Path()+"\x00"+o.Host, &sync.Mutex{})
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
		var objs []fleet.Object
		live := false
		for _, l := range m.Live() {
			if l.Host == o.Host && slices.Contains(prepKinds, l.Kind) {
				objs = append(objs, l)
			}
			live = live || l.Same(o)
		}
		if !live {
			return nil // undone with its host's other objects
		}
		ctx, cancel := context.WithTimeout(ctx, prepCleanTimeout)
		defer cancel()
		done, err := CleanPrep(ctx, objs, m.RunID, OptionsFrom(plan.Config.SSH), say)
		for _, d := range done {
			_ = m.Deleted(d)
			if d.Same(o) {
				err = nil
			}
		}
		if err == nil && !slices.ContainsFunc(done, o.Same) {
			err = fmt.Errorf("not undone")
		}
		return err
	}
}
