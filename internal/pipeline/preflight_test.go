package pipeline

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
)

// localPlan is a local run on the 2 × H200 of testdata/h200x2.xml (no driver needed), engine kind
// vllm whose program and python3 are found on pathDir only, its model in the empty cache dir
// cache, the hub at hub.
func localPlan(t *testing.T, pathDir, cache, hub string) *config.Plan {
	t.Helper()
	c := config.Defaults()
	c.Backend = "local"
	c.Health.Source = "testdata/h200x2.xml"
	c.Models = []string{"Qwen/Qwen3-8B"}
	c.Engine.Kind = "vllm"
	c.Engine.Env = map[string]string{"PATH": pathDir, "PYTHONNOUSERSITE": "1"}
	c.Engine.PortBase = 20000 + os.Getpid()%20000
	c.ModelCache.Dir, c.ModelCache.Endpoint, c.ModelCache.Offline = cache, hub, false
	c.Output.Dir = filepath.Join(t.TempDir(), "out")
	return &config.Plan{Config: c}
}

// fakeEngineDir is a PATH folder with a `vllm` program and python3 (this host's, by link); when
// withModule, a vllm package python3 finds (engine.env PYTHONPATH).
func fakeEngineDir(t *testing.T, plan *config.Plan, withVLLM, withModule bool) string {
	t.Helper()
	dir := t.TempDir()
	py, err := lookPath("python3", "/usr/bin:/bin")
	if err != nil {
		t.Skip("no python3 on this host")
	}
	if err := os.Symlink(py, filepath.Join(dir, "python3")); err != nil {
		t.Fatal(err)
	}
	if withVLLM {
		if err := os.WriteFile(filepath.Join(dir, "vllm"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if withModule {
		pkg := filepath.Join(t.TempDir(), "site")
		if err := os.MkdirAll(filepath.Join(pkg, "vllm"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(pkg, "vllm", "__init__.py"), []byte("__version__ = '0.0-test'\n"), 0o644)
		plan.Config.Engine.Env["PYTHONPATH"] = pkg
	}
	plan.Config.Engine.Env["PATH"] = dir
	return dir
}

// hubUp is a stand-in hub that answers every request.
func hubUp(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// hubDown is a hub address nothing listens on.
func hubDown(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func preflightErr(t *testing.T, plan *config.Plan) string {
	t.Helper()
	err := Preflight(plan, catalog.Builtin())
	if err == nil {
		return ""
	}
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("not a bad-input error (exit 2): %v", err)
	}
	return err.Error()
}

// A local run whose every piece is there passes the preflight: the engine's program and module,
// the model reachable through the hub, the GPUs and a port per engine.
func TestPreflightPassesACompleteLocalHost(t *testing.T) {
	plan := localPlan(t, "", t.TempDir(), hubUp(t))
	fakeEngineDir(t, plan, true, true)
	if msg := preflightErr(t, plan); msg != "" {
		t.Fatalf("preflight refused a complete host: %s", msg)
	}
}

// One test per missing piece: each is refused before anything runs (exit 2) with its fix.
func TestPreflightNamesEachMissingPiece(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, plan *config.Plan)
		want  []string
	}{
		{"no engine program", func(t *testing.T, plan *config.Plan) { fakeEngineDir(t, plan, false, true) },
			[]string{`vllm is not installed: no "vllm" on the engine's PATH`, "`pip install vllm`", "--engine transformers"}},
		{"engine module missing for python3", func(t *testing.T, plan *config.Plan) { fakeEngineDir(t, plan, true, false) },
			[]string{"vllm is not installed for python3", "finds no module vllm", "`pip install vllm`", "--engine transformers"}},
		{"transformers front without its modules", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, false)
			plan.Config.Engine.Kind = "transformers"
		}, []string{"transformers is not installed for python3", "no module transformers, torch", "`pip install transformers torch aiohttp`"}},
		{"model not cached, hub unreachable", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, true)
			plan.Config.ModelCache.Endpoint = hubDown(t)
		}, []string{"model Qwen/Qwen3-8B is not in the model cache", "cannot be reached", "gpuvet cache pull Qwen/Qwen3-8B"}},
		{"model not cached, hub offline", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, true)
			t.Setenv("HF_HUB_OFFLINE", "1")
		}, []string{"model Qwen/Qwen3-8B is not in the model cache", "the hub is offline"}},
		{"model folder without config.json", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, true)
			plan.Config.Models = []string{t.TempDir()}
		}, []string{"the folder has no config.json"}},
		{"more GPUs asked than the host has", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, true)
			plan.Config.Run.GPUCount = 4
		}, []string{"--gpu-count 4 (run.gpu_count): this host has 2 GPU(s)"}},
		{"tensor parallel wider than the run", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, true)
			plan.Config.Engine.TP = 4
		}, []string{"engine.tp 4: an engine needs 4 GPUs and the run has 2"}},
		{"no free port for an engine", func(t *testing.T, plan *config.Plan) {
			fakeEngineDir(t, plan, true, true)
			// Engine 0 may use 65530..65535 (the last ports there are): all taken; engine 1 has none.
			plan.Config.Engine.PortBase = 65530
			for p := 65530; p <= 65535; p++ {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
				if err != nil {
					t.Skipf("port %d is in use here already: %v", p, err)
				}
				t.Cleanup(func() { l.Close() })
			}
		}, []string{"engine 0: no free port in 65530..", "engine 1: no free port", "engine.port_base 65530"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := localPlan(t, "", t.TempDir(), hubUp(t))
			tc.setup(t, plan)
			msg := preflightErr(t, plan)
			if msg == "" {
				t.Fatal("preflight passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal lacks %q:\n%s", w, msg)
				}
			}
			if !strings.Contains(msg, "this host cannot run the plan; nothing was started:\n  - ") {
				t.Errorf("not a list of what is missing: %s", msg)
			}
		})
	}
}

// A host missing several pieces hears of them all at once, not one per attempt.
func TestPreflightListsEveryMissingPiece(t *testing.T) {
	plan := localPlan(t, "", t.TempDir(), hubDown(t))
	fakeEngineDir(t, plan, false, false)
	plan.Config.Run.GPUCount = 3
	msg := preflightErr(t, plan)
	for _, w := range []string{"vllm is not installed", "not in the model cache", "--gpu-count 3"} {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal lacks %q:\n%s", w, msg)
		}
	}
	if n := strings.Count(msg, "\n  - "); n != 3 {
		t.Errorf("want 3 pieces listed, got %d:\n%s", n, msg)
	}
	t.Log(msg)
}

// The simulator's backend checks none of a host's pieces: it needs no engine, model or port.
func TestPreflightLeavesTheSimulatorAlone(t *testing.T) {
	plan := localPlan(t, "", t.TempDir(), hubDown(t))
	fakeEngineDir(t, plan, false, false)
	plan.Config.Backend, plan.Config.Health.Source = "sim", "auto"
	if msg := preflightErr(t, plan); msg != "" {
		t.Fatalf("the simulator was refused: %s", msg)
	}
}

// A pip-installed engine program runs the interpreter of its #! line (a virtual environment's):
// that one is asked for the modules, not python3 on PATH (here one that cannot run).
func TestPreflightAsksTheEnginesOwnPython(t *testing.T) {
	plan := localPlan(t, "", t.TempDir(), hubUp(t))
	dir := fakeEngineDir(t, plan, false, true)
	venv := t.TempDir()
	real, err := os.Readlink(filepath.Join(dir, "python3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(venv, "python3")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "python3"))
	os.WriteFile(filepath.Join(dir, "python3"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	script := "#!" + filepath.Join(venv, "python3") + "\nimport sys\n"
	if err := os.WriteFile(filepath.Join(dir, "vllm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if msg := preflightErr(t, plan); msg != "" {
		t.Fatalf("refused: %s", msg)
	}
}

// A load setting the load generator refuses (a warm-up or a load past its bounds) is bad
// input before anything starts: before, the preflight passed it, the health phase and every engine
// ran, and each GPU's load then failed on it.
func TestPreflightRefusesALoadTheGeneratorRefuses(t *testing.T) {
	for set, want := range map[string]string{
		"load.warmup=200h":            "--warmup",
		"load.max_concurrency=200000": "--max-concurrency",
		"load.max_duration=200h":      "--max-duration",
		"load.output_tokens=2000000":  "--output-tokens",
		"load.rate=2e6":               "--rate",
	} {
		plan, err := config.Load(config.Options{Sets: []string{"backend=sim", set, "engine.max_model_len=4000000",
			"output.dir=" + filepath.Join(t.TempDir(), "out")}})
		if err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		err = Preflight(plan, nil)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: preflight gave %v, want bad input naming %s", set, err, want)
		}
	}
}

// An accelerators entry's load is checked as the plan's is: a GPU it names would run it.
func TestPreflightRefusesAnAcceleratorsLoadTheGeneratorRefuses(t *testing.T) {
	plan, err := config.Load(config.Options{Sets: []string{"backend=sim", "accelerators.H200.load.max_concurrency=200000",
		"output.dir=" + filepath.Join(t.TempDir(), "out")}})
	if err != nil {
		t.Fatal(err)
	}
	err = Preflight(plan, nil)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "--max-concurrency") || !strings.Contains(err.Error(), "H200") {
		t.Errorf("preflight gave %v, want bad input naming the accelerators entry and --max-concurrency", err)
	}
}
