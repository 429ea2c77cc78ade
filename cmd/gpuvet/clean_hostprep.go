package main

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/ssh"
	"github.com/gpuvet/gpuvet/internal/vfio"
)

// Host preparation's leftovers (packages a killed run installed, the DCGM engine it started, GPUs
// it released from vfio-pci): one host's are undone together and in order (vfio binding, engine,
// packages, autoremove), once, whichever of its objects clean reaches first; the others then find
// themselves done: removerFor sends every one of prepKinds to cleanHostPrep.

// prepKinds are the manifest kinds of host preparation and of a node's vfio release.
var prepKinds = append(slices.Clone(hostprep.Kinds), vfio.Kinds...)

var hostPrepLocks sync.Map // manifest path + host -> *sync.Mutex

func cleanHostPrep(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, say func(string)) error {
	mu, _ := hostPrepLocks.LoadOrStore(m.Path()+"\x00"+o.Host, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	same := func(a, b fleet.Object) bool { return a.Kind == b.Kind && a.Name == b.Name && a.Host == b.Host }
	var objs []fleet.Object
	live := false
	for _, l := range m.Live() {
		if l.Host == o.Host && slices.Contains(prepKinds, l.Kind) {
			objs = append(objs, l)
		}
		live = live || same(l, o)
	}
	if !live {
		return nil // undone with its host's other objects
	}
	done, err := ssh.CleanPrep(ctx, objs, m.RunID, ssh.OptionsFrom(plan.Config.SSH), say)
	for _, d := range done {
		_ = m.Deleted(d)
		if same(d, o) {
			err = nil
		}
	}
	if err == nil && !slices.ContainsFunc(done, func(d fleet.Object) bool { return same(d, o) }) {
		err = fmt.Errorf("not undone")
	}
	return err
}
