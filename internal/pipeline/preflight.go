package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/importer"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/results"
)

// ErrBadInput marks a preflight failure: bad input found before anything started (exit 2).
var ErrBadInput = errors.New("bad input")

// Preflight checks against cat (nil: the built-in catalog), before anything starts, what a run needs that can be checked cheaply: the
// simulator knows its GPU and models, a local run has an NVIDIA driver (or another GPU source), an
// endpoint run's server answers and lists every model (as `gpuvet bench` checks it), and the output
// folder can be written. Every error wraps ErrBadInput and names what to do; nothing has
// been written when it fails.
func Preflight(plan *config.Plan, cat *catalog.Catalog) error {
	c := plan.Config
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
	}
	if err := resolveGPUNames(&plan.Config, cat); err != nil {
		return err
	}
	if c.Backend == "sim" {
		if _, ok := cat.LookupGPU(c.Sim.GPU); !ok {
			return bad("--sim-gpu %q (sim.gpu) is not in the catalog; known: %s", c.Sim.GPU, strings.Join(cat.GPUKeys(), ", "))
		}
		for _, m := range c.Models {
			if _, ok := cat.LookupModel(m); !ok {
				return bad("--model %q (models) is not in the catalog the simulator serves; known: %s", m, strings.Join(cat.ModelIDs(), ", "))
			}
		}
	}
	if c.Backend == "local" && (c.Health.Source == "auto" || c.Health.Source == "nvml") {
		src, err := gpu.OpenNVML()
		if errors.Is(err, gpu.ErrNoDriver) {
			return bad("%v: this host has no NVIDIA driver; on a host without GPUs use --sim (or health.source=sim, or a captured nvidia-smi XML file)", err)
		}
		if err == nil {
			src.Close()
		}
	}
	if c.Backend == "endpoint" {
		for _, m := range c.Models {
			if err := load.Preflight(context.Background(), load.Options{URL: c.Endpoint.URL, Model: m, APIKeyEnv: c.Endpoint.APIKeyEnv}); err != nil {
				return bad("%v", err)
			}
		}
	}
	if err := checkBaseline(c.Run.Baseline); err != nil {
		return err
	}
	return checkWritable(c.Output.Dir)
}

// checkBaseline reads a baseline named for this run up front: one that cannot be read would
// otherwise leave the run without its comparison and pass, however long the run took.
func checkBaseline(path string) error {
	if path == "" {
		return nil
	}
	if _, _, err := importer.Read(path); err != nil {
		return fmt.Errorf("%w: --baseline %s (run.baseline): %v; give a summary.json or baseline.json of an earlier run (gpuvet run --save-baseline), a vLLM bench result or a guidellm report, or drop --baseline", ErrBadInput, path, err)
	}
	return nil
}

// checkWritable makes sure dir can hold the results (creating nothing that was not there).
func checkWritable(dir string) error {
	probe := dir
	for {
		st, err := os.Stat(probe)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%w: --out %s: %s is not a directory", ErrBadInput, dir, probe)
			}
			if unix.Access(probe, unix.W_OK|unix.X_OK) != nil {
				return fmt.Errorf("%w: --out %s: %s is not writable; choose another --out", ErrBadInput, dir, probe)
			}
			return nil
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return fmt.Errorf("%w: --out %s: %v", ErrBadInput, dir, err)
		}
		probe = parent
	}
}

// outputs are the files and folders a run writes in its output folder: what --force replaces.
var outputs = []string{"summary.json", "baseline.json", "report.html", "report.pdf", "junit.xml", "gpuvet.prom", "raw", "logs",
	"hosts", "vm_known_hosts"} // a fleet run's: each host's own results, the VMs' host keys (trusted on first use)

// OutLock holds the output folder for one run: an exclusive lock (released when the run ends, or
// when the process dies), so two runs never write into one folder.
type OutLock struct{ f *os.File }

// Release releases the lock.
func (l *OutLock) Release() {
	if l != nil && l.f != nil {
		_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
		l.f.Close()
	}
}

// LockOutput takes the output folder for a run. It refuses a folder another gpuvet run is writing
// to, and one holding an earlier run's results unless force, when those results (and only gpuvet's
// own files: summary, reports, raw/, logs/) are removed first, so nothing stale mixes with the new
// run's files.
func LockOutput(dir string, force bool) (*OutLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: --out %s: %v", ErrBadInput, dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".gpuvet.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: --out %s: %v", ErrBadInput, dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: --out %s: another gpuvet run is writing there; wait for it or choose another --out", ErrBadInput, dir)
	}
	l := &OutLock{f: f}
	if !force {
		for _, name := range outputs {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				continue
			}
			l.Release()
			what := "an earlier run (" + name + ")"
			if s, err := results.Read(filepath.Join(dir, "summary.json")); err == nil {
				what = fmt.Sprintf("run %s (status %s)", s.RunID, s.Status)
			}
			return nil, fmt.Errorf("%w: --out %s holds the results of %s; pass --force to replace them, or choose another --out", ErrBadInput, dir, what)
		}
	} else {
		for _, name := range outputs {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				l.Release()
				return nil, fmt.Errorf("--out %s: cannot remove the earlier run's %s: %v", dir, name, err)
			}
		}
	}
	return l, nil
}
