package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/importer"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// ErrBadInput marks a preflight failure: bad input found before anything started (exit 2).
var ErrBadInput = errors.New("bad input")

// Preflight checks against cat (nil: the built-in catalog), before anything starts, what a run needs
// that is cheap to check: the simulator knows its GPU and models, a local run has a GPU source, an
// endpoint answers and lists every model, the output folder is writable. Every error wraps
// ErrBadInput and names what to do; nothing has been written when it fails.
func Preflight(plan *config.Plan, cat *catalog.Catalog) error {
	c := plan.Config
	if err := ResolveGPUNames(&plan.Config, cat); err != nil {
		return err
	}
	kind := backendkind.Of(c.Backend)
	if kind.Simulated {
		if err := simPreflight(c, cat); err != nil {
			return err
		}
	}
	if kind.ThisHost {
		if missing := localPreflight(c, cat); len(missing) > 0 {
			return badInput("this host cannot run the plan; nothing was started:\n  - %s", strings.Join(missing, "\n  - "))
		}
	}
	if !kind.DiscoversGPUs { // given a server: it must answer and list every model
		for _, m := range c.Models {
			if err := load.Preflight(context.Background(), load.Options{URL: c.Endpoint.URL, Model: m, APIKeyEnv: c.Endpoint.APIKeyEnv}); err != nil {
				return badInput("%v", err)
			}
		}
	}
	maxLen := 0
	if kind.Engines || kind.Simulated { // gpuvet starts the engine (or simulates it): its context length is the plan's
		maxLen = c.Engine.MaxModelLen
	}
	if !kind.Fleet { // the load runs from this process: what its generator refuses, refused now
		if err := loadPreflight(plan); err != nil {
			return err
		}
	}
	if err := load.CheckWorkload(c.LoadConfig(), maxLen); err != nil {
		return badInput("load: %v", err)
	}
	if err := checkBaseline(c.Run.Baseline); err != nil {
		return err
	}
	return checkWritable(c.Output.Dir)
}

// badInput is a preflight refusal: bad input found before anything started (exit 2).
func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// simPreflight checks that the simulator knows the plan's GPU and models and can make its host.
func simPreflight(c config.Config, cat *catalog.Catalog) error {
	if _, ok := cat.LookupGPU(c.Sim.GPU); !ok {
		return badInput("--sim-gpu %q (sim.gpu) is not in the catalog; known: %s", c.Sim.GPU, strings.Join(cat.GPUKeys(), ", "))
	}
	for _, m := range c.Models {
		if _, ok := cat.LookupModel(m); !ok {
			return badInput("--model %q (models) is not in the catalog the simulator serves; known: %s", m, strings.Join(cat.ModelIDs(), ", "))
		}
	}
	// The simulator's own rules (config checks only the forms; a bad span was otherwise caught at
	// discovery, a failed host in the history): making the fleet checks them, starting nothing.
	if _, err := sim.NewFleet(simFleetConfig(c, cat)); err != nil {
		return badInput("the simulated host (the --sim-* flags, the sim section): %v", err)
	}
	if c.Run.GPUCount > c.Sim.GPUs {
		return badInput("--gpu-count %d (run.gpu_count): the simulator has %d GPU(s) (--sim-gpus, sim.gpus); give at most %d, or 0 for all", c.Run.GPUCount, c.Sim.GPUs, c.Sim.GPUs)
	}
	return nil
}

// loadPreflight refuses now what the load generator would refuse once the engines are up: the
// plan's load and that of every accelerators entry (a GPU it names runs it).
func loadPreflight(plan *config.Plan) error {
	c := plan.Config
	if err := load.Validate(preflightLoad(c)); err != nil {
		return badInput("load (the load section, or its flag): %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Accelerators)) { // a GPU it names runs its load
		ac, _, _ := plan.ForGPU(k)
		if err := load.Validate(preflightLoad(ac)); err != nil {
			return badInput("load of accelerators[%q] (as a GPU it names would run it): %v", k, err)
		}
	}
	return nil
}

// preflightLoad is the load of the plan's first model as load.Validate checks it: the engine's
// address is not known yet, so an endpoint run gives its URL and any other one the first engine's.
func preflightLoad(c config.Config) load.Options {
	url := c.Endpoint.URL
	if backendkind.Of(c.Backend).DiscoversGPUs {
		url = fmt.Sprintf("http://127.0.0.1:%d", c.Engine.PortBase)
	}
	model := ""
	if len(c.Models) > 0 {
		model = c.Models[0]
	}
	return load.Options{URL: url, Model: model, APIKeyEnv: c.Endpoint.APIKeyEnv, Config: c.LoadConfig(),
		RetryUnsaturated: c.Load.RetryUnsaturated, MaxNumSeqs: maxNumSeqs(c)}
}

// preflightTimeout bounds each check of a host's preflight that waits on something (the hub, a
// Python interpreter): together they keep a refusal within seconds.
const preflightTimeout = 5 * time.Second

// localPreflight lists what a local run lacks, each with its fix: the GPUs (a driver, as many as
// run.gpu_count and engine.tp ask), the engine (its program and Python modules), every model (a
// folder, the model cache, or a hub that answers) and a free port for every engine.
func localPreflight(c config.Config, cat *catalog.Catalog) []string {
	var missing []string
	if n, why := hostGPUs(c, cat); why != "" {
		missing = append(missing, why)
	} else {
		use := n // the GPUs the run uses
		if c.Run.GPUCount > 0 {
			use = min(n, c.Run.GPUCount)
		}
		missing = append(missing, gpuCountProblems(c, n, use)...)
		missing = append(missing, portProblems(c, use)...)
	}
	missing = append(missing, engineProblems(c)...)
	for _, m := range c.Models {
		if err := modelcache.Preflight(context.Background(), m, c.Engine.Kind, c.ModelCache, preflightTimeout); err != nil {
			missing = append(missing, err.Error())
		}
	}
	return missing
}

// hostGPUs counts the GPUs the run's GPU source sees, or says why it cannot.
func hostGPUs(c config.Config, cat *catalog.Catalog) (int, string) {
	var src gpu.Source
	var err error
	switch c.Health.Source {
	case sourceSim:
		return c.Sim.GPUs, ""
	case "auto", sourceNVML:
		src, err = gpu.OpenNVML()
		if errors.Is(err, gpu.ErrNoDriver) {
			return 0, fmt.Sprintf("%v: this host has no NVIDIA driver; on a host without GPUs use --sim (or health.source=sim, or a captured nvidia-smi XML file)", err)
		}
	default:
		src, err = gpu.FromNvidiaSMIXML(c.Health.Source, cat)
	}
	var gs []results.GPUInfo
	if err == nil {
		defer src.Close()
		gs, err = src.GPUs()
	}
	if err != nil {
		return 0, fmt.Sprintf("GPUs (health.source %s): %v", c.Health.Source, err)
	}
	return len(gs), ""
}

// gpuCountProblems checks run.gpu_count and engine.tp against the n GPUs the host has, use of
// them the run's.
func gpuCountProblems(c config.Config, n, use int) []string {
	var out []string
	switch {
	case n == 0:
		out = append(out, "no GPU found on this host: check `nvidia-smi`, or use --sim")
	case c.Run.GPUCount > n:
		out = append(out, fmt.Sprintf("--gpu-count %d (run.gpu_count): this host has %d GPU(s); give at most %d, or 0 for all", c.Run.GPUCount, n, n))
	}
	if tp := max(1, c.Engine.TP); n > 0 && tp > use {
		out = append(out, fmt.Sprintf("engine.tp %d: an engine needs %d GPUs and the run has %d; lower engine.tp, or raise --gpu-count", tp, tp, use))
	}
	return out
}

// portProblems checks that every engine finds a free port: engine i listens on the first free one
// from engine.port_base + 10 i on; use is how many GPUs the run uses.
func portProblems(c config.Config, use int) []string {
	var out []string
	for i := 0; i < max(1, use/max(1, c.Engine.TP)); i++ {
		base := c.Engine.PortBase + 10*i
		if _, err := engine.FreePort(base); err != nil {
			out = append(out, fmt.Sprintf("engine %d: %v (engine.port_base %d)", i, err, c.Engine.PortBase))
		}
	}
	return out
}

// engineProblems checks the engine can start: its program on the engine's PATH and, for a kind's
// own template, its Python modules importable by python3 in the engine's environment.
func engineProblems(c config.Config) []string {
	k := enginekind.Get(c.Engine.Kind)
	words := strings.Fields(cmp.Or(c.Engine.Command, k.Template))
	if len(words) == 0 {
		return nil // config's validation refuses a kind without a command
	}
	env := engineEnv(c)
	path := envValue(env, "PATH")
	fix := "; or another engine: --engine " + strings.Join(otherKinds(c.Engine.Kind), ", --engine ") + ", or --engine-cmd"
	if k.Install != "" && c.Engine.Command == "" {
		fix = ": `" + k.Install + "`" + fix
	}
	prog, err := lookPath(words[0], path)
	if err != nil {
		return []string{fmt.Sprintf("%s is not installed: no %q on the engine's PATH (engine.env's, else gpuvet's)%s", c.Engine.Kind, words[0], fix)}
	}
	if c.Engine.Command != "" || len(k.Modules) == 0 {
		return nil
	}
	py := prog
	if base := filepath.Base(prog); !strings.HasPrefix(base, "python") {
		// A pip-installed program (vllm, trtllm-serve) runs the interpreter of its #! line, which may
		// be a virtual environment's rather than python3 on PATH (pipx, a venv's bin linked).
		py = shebangPython(prog)
	}
	if py = cmp.Or(py, "python3"); !filepath.IsAbs(py) {
		if py, err = lookPath(py, path); err != nil {
			return []string{fmt.Sprintf("%s is not installed for python3: no python3 on the engine's PATH (engine.env's, else gpuvet's)%s", c.Engine.Kind, fix)}
		}
	}
	gone, err := missingModules(py, env, k.Modules)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("%s: cannot ask %s which modules it has (%v)%s", c.Engine.Kind, py, err, fix)}
	case len(gone) > 0:
		return []string{fmt.Sprintf("%s is not installed for python3 (%s finds no module %s)%s", c.Engine.Kind, py, strings.Join(gone, ", "), fix)}
	}
	return nil
}

// shebangPython is the Python interpreter of prog's "#!" line ("" when it has none).
func shebangPython(prog string) string {
	f, err := os.Open(prog)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if !strings.HasPrefix(line, "#!") || len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 { // #!/usr/bin/env python3
		fields = fields[1:]
	}
	if !strings.HasPrefix(filepath.Base(fields[0]), "python") {
		return ""
	}
	return fields[0]
}

// missingModules asks py which of mods it cannot import (found without importing them: an engine's
// import takes seconds).
func missingModules(py string, env, mods []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), preflightTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-c",
		"import importlib.util, sys\nprint(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"}, mods...)...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// engineEnv is the environment engines start with: gpuvet's, with engine.env over it.
func engineEnv(c config.Config) []string {
	env := os.Environ()
	for k, v := range c.Engine.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// envValue is the last value of key in env (later entries win, as for exec).
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// lookPath finds file as exec.LookPath does, but on path rather than gpuvet's own PATH.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		if executable(file) {
			return file, nil
		}
		return "", fmt.Errorf("%s is not an executable file", file)
	}
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(cmp.Or(dir, "."), file); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found on PATH", file)
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// otherKinds are the engine kinds with a template other than kind.
func otherKinds(kind string) []string {
	var out []string
	for _, k := range enginekind.Kinds {
		if k.Name != kind && k.Template != "" {
			out = append(out, k.Name)
		}
	}
	return out
}

// checkBaseline reads a baseline named for this run up front: one that cannot be read would
// otherwise leave the run without its comparison and pass, however long the run took.
func checkBaseline(path string) error {
	if path == "" {
		return nil
	}
	if _, _, err := importer.Read(path); err != nil {
		return badInput("--baseline %s (run.baseline): %v; give a summary.json or baseline.json of an earlier run "+
			"(gpuvet run --save-baseline), a vLLM bench result or a guidellm report, or drop --baseline", path, err)
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
				return badInput("--out %s: %s is not a directory", dir, probe)
			}
			if unix.Access(probe, unix.W_OK|unix.X_OK) != nil {
				return badInput("--out %s: %s is not writable; choose another --out", dir, probe)
			}
			return nil
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return badInput("--out %s: %v", dir, err)
		}
		probe = parent
	}
}

// outputs are the files a run writes at the top of its output folder: what --force replaces. In
// results.OutputFolders it removes only the files the earlier summary lists (Summary.Outputs).
var outputs = []string{"summary.json", "baseline.json", "report.html", "report.pdf", "junit.xml", "ctrf.json", "gpuvet.prom",
	"vm_known_hosts"} // a fleet run's VMs' host keys (trusted on first use)

// OutLock holds the output folder for one run: an exclusive lock (released when the run ends, or
// when the process dies), so two runs never write into one folder.
type OutLock struct{ f *os.File }

// Release releases the lock and removes its file, so nothing of it stays in the user's folder. It
// is unlinked while still held, so the next run makes a new file and locks that; a killed run's
// leftover file is still lockable and taken over.
func (l *OutLock) Release() {
	if l != nil && l.f != nil {
		_ = os.Remove(l.f.Name())
		_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}

// LockOutput takes the output folder for a run. It refuses a folder another gpuvet run is writing
// to, and one holding an earlier run's results unless force, which removes that run's files first
// (outputs, and in results.OutputFolders those its summary lists, then the folders left empty).
// What it leaves (a user's logs/app.log) is said in left.
func LockOutput(dir string, force bool) (_ *OutLock, left []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, badInput("--out %s: %v", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".gpuvet.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, badInput("--out %s: %v", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, nil, badInput("--out %s: another gpuvet run is writing there; wait for it or choose another --out", dir)
	}
	lock := &OutLock{f: f}
	defer func() {
		if err != nil {
			lock.Release() // a refusal leaves nothing of the lock
		}
	}()
	earlier, _ := results.Read(filepath.Join(dir, "summary.json"))
	if !force {
		for _, name := range outputs {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				continue
			}
			what := "an earlier run (" + name + ")"
			if earlier != nil {
				what = fmt.Sprintf("run %s (status %s)", earlier.RunID, earlier.Status)
			}
			return nil, nil, badInput("--out %s holds the results of %s; pass --force to replace them, or choose another --out", dir, what)
		}
		return lock, nil, nil
	}
	root, err := os.OpenRoot(dir) // no removal may leave the folder, through ".." or a symlink
	if err != nil {
		return nil, nil, badInput("--out %s: %v", dir, err)
	}
	defer root.Close()
	for _, name := range outputs {
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("--out %s: cannot remove the earlier run's %s: %w", dir, name, err)
		}
	}
	if earlier != nil {
		for _, name := range earlier.Outputs {
			// Only a file of results.OutputFolders: a summary naming "notes.txt" or a path through
			// a symlink out of the folder names nothing gpuvet wrote.
			top, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(name)), "/")
			if !slices.Contains(results.OutputFolders, top) {
				continue
			}
			if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				left = append(left, fmt.Sprintf("%s (not removed: %v)", name, err))
			}
		}
	}
	return lock, append(left, pruneOutputFolders(dir)...), nil
}

// pruneOutputFolders removes the folders of results.OutputFolders that removing the earlier run's
// files left empty, and returns the files still in them (not gpuvet's, or from a run whose summary
// did not list them), at most 20 named.
func pruneOutputFolders(dir string) []string {
	var left []string
	for _, sub := range results.OutputFolders {
		root := filepath.Join(dir, sub)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return nil
			case d.IsDir():
				dirs = append(dirs, p)
			case len(left) < 20:
				rel, _ := filepath.Rel(dir, p)
				left = append(left, rel)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // deepest first; a folder with anything in it stays
			_ = os.Remove(dirs[i])
		}
	}
	return left
}
