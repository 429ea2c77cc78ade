// Package registry maps a fleet backend's name to its package's opener and cleaner: the one place
// that names the backend packages. Only the command imports it (internal/layering keeps that):
// config, the pipeline and the fleet layer read the backend table (internal/backendkind) and
// never reach a backend. Adding a fleet backend is its package (Open and a Cleaner), its row in
// the backend table, and one line here (docs/architecture.md, "How to add a backend").
package registry

import (
	"sort"
	"sync"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/opennebula"
	"github.com/gpuvet/gpuvet/internal/slurm"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// Backend is one fleet backend: how `gpuvet run` opens it (an error is bad input, exit 2; close
// releases what Open took), how `gpuvet clean` removes what its killed runs left, and the flags
// it adds to `gpuvet run` and `gpuvet config show` (Flags) and to `gpuvet clean` (CleanFlags: how
// clean reaches it; nil: none); the backend table maps every flag to its key.
type Backend struct {
	Open       func(plan *config.Plan) (b fleet.Backend, close func(), err error)
	Clean      fleet.Cleaner
	Flags      func(fl *pflag.FlagSet)
	CleanFlags func(fl *pflag.FlagSet)
	// NodeHealth is the backend's hook on its own node for `gpuvet health` (nil: none).
	NodeHealth *fleet.NodeHealth
}

var (
	mu       sync.RWMutex
	backends = map[string]Backend{
		"ssh":        {Open: ssh.Open, Clean: ssh.Cleaner, Flags: ssh.Flags},
		"opennebula": {Open: opennebula.Open, Clean: opennebula.Cleaner, Flags: opennebula.Flags},
		"kubernetes": {Open: k8s.Open, Clean: k8s.Cleaner, Flags: k8s.Flags, CleanFlags: k8s.ConnectFlags},
		"slurm":      {Open: slurm.Open, Clean: slurm.Cleaner, Flags: slurm.Flags, NodeHealth: slurm.NodeHealth},
	}
)

// Get returns the backend named name (false: no fleet backend of that name).
func Get(name string) (Backend, bool) {
	mu.RLock()
	defer mu.RUnlock()
	b, ok := backends[name]
	return b, ok
}

// NodeHealths lists the backends' node hooks for `gpuvet health`, by name.
func NodeHealths() []*fleet.NodeHealth {
	var out []*fleet.NodeHealth
	for _, n := range Names() {
		if b, _ := Get(n); b.NodeHealth != nil {
			out = append(out, b.NodeHealth)
		}
	}
	return out
}

// Names lists the registered backends, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	ns := make([]string, 0, len(backends))
	for n := range backends {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Register adds a backend under name, e.g. a test's fake in its own test binary (with its row in
// the backend table). A name already taken panics: two packages cannot claim one backend.
func Register(name string, b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := backends[name]; ok {
		panic("registry: backend " + name + " registered twice")
	}
	backends[name] = b
}
