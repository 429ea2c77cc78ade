package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/testwait"
)

// TestMain lets the test binary act as the gpuvet binary (GPUVET_TEST_AS_GPUVET=1), so `gpuvet run`
// and the `gpuvet sim` engines it launches through the generic template are real processes.
func TestMain(m *testing.M) {
	if os.Getenv("GPUVET_TEST_AS_GPUVET") == "1" {
		reportEnv()
		os.Exit(execute(os.Args[1:]))
	}
	// A whole simulated run takes 20 s on its engines' clock for 3 s of CPU; the fleet tests wait
	// on their hosts, the Slurm cluster and sshd: three at once (four starved the real-node tests beside
	// the go test in CI: docs/testing.md).
	testwait.Parallel(3)
	os.Exit(withStateDir(m))
}

// withStateDir runs the tests with gpuvet's state (run manifests, the history database) in a
// folder of their own, unless the caller chose one: a test's runs never land in the user's history.
// The runs it starts keep no history (GPUVET_HISTORY_ENABLED=false, which a test's --set beats):
// every simulated GPU has the same UUID in every test, and one test's run would become the next
// one's acceptance; the history's own tests (history_test.go) set it.
func withStateDir(m *testing.M) int {
	if os.Getenv("GPUVET_HISTORY_ENABLED") == "" {
		os.Setenv("GPUVET_HISTORY_ENABLED", "false")
	}
	if os.Getenv("GPUVET_STATE_DIR") != "" {
		return m.Run()
	}
	d, err := os.MkdirTemp("", "gpuvet-test-state-")
	if err != nil {
		return m.Run()
	}
	defer os.RemoveAll(d)
	os.Setenv("GPUVET_STATE_DIR", d)
	return m.Run()
}

// reportEnv lets a real-sshd test see what a remote run got: with GPUVET_TEST_ENV_REPORT set (by
// the test's sshd), it appends whether HF_TOKEN arrived (its value, which the test made up) and
// whether it was in this process's argv or its parent's.
func reportEnv() {
	f := os.Getenv("GPUVET_TEST_ENV_REPORT")
	tok := os.Getenv("HF_TOKEN")
	if f == "" || len(os.Args) < 2 || os.Args[1] != "run" {
		return
	}
	self, _ := os.ReadFile("/proc/self/cmdline")
	parent, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", os.Getppid()))
	inArgv := tok != "" && (strings.Contains(string(self), tok) || strings.Contains(string(parent), tok))
	line := fmt.Sprintf("HF_TOKEN=%s argv=%v\n", tok, inArgv)
	if w, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		w.WriteString(line)
		w.Close()
	}
}

// genericSimArgs is `gpuvet run` with engine = `gpuvet sim` launched through the generic template,
// GPUs from the simulator's fleet, and a short profile.
func genericSimArgs(out string, gpus, port int) []string {
	self, _ := os.Executable()
	return []string{"run", "--out", out, "--engine", "generic",
		"--engine-cmd", self + " sim --gpu H200 --model {model} --port {port} --max-model-len {max_model_len}",
		"--set", "engine.version_command=" + self + " --version",
		"--set", "health.source=sim", "--set", "sim.gpus=" + strconv.Itoa(gpus), "--set", "engine.port_base=" + strconv.Itoa(port),
		"--set", "load.max_duration=1500ms", "--set", "load.rates=2", "--set", "load.prompt_tokens=64",
		"--set", "load.output_tokens=32", "--set", "load.max_concurrency=4"}
}

func gpuvet(args ...string) *exec.Cmd {
	self, _ := os.Executable()
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "GPUVET_TEST_AS_GPUVET=1")
	return cmd
}

// engineProcs lists live processes running `<this binary> sim ... --port N` with N in [port, port+50).
func engineProcs(t *testing.T, port int) []string {
	self, _ := os.Executable()
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) < 2 || args[0] != self || args[1] != "sim" {
			continue
		}
		for i, a := range args {
			if a == "--port" && i+1 < len(args) {
				if p, _ := strconv.Atoi(args[i+1]); p >= port && p < port+50 {
					if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); !strings.Contains(string(st), ") Z ") {
						out = append(out, fmt.Sprintf("pid %d: %s", pid, strings.Join(args, " ")))
					}
				}
			}
		}
	}
	return out
}

func TestRunGenericSimThroughRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own random engine ports and folders: it waits on the run more than it computes
	out := t.TempDir()
	port := 20000 + rand.IntN(20000)
	cmd := gpuvet(genericSimArgs(out, 2, port)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 {
		t.Fatalf("usage error: %s", stderr.String())
	}
	s, rerr := results.Read(filepath.Join(out, "summary.json"))
	if rerr != nil {
		t.Fatalf("summary: %v\n%s", rerr, stderr.String())
	}
	if !s.Complete || s.Meta.Engine != "generic" || !strings.Contains(s.Meta.EngineVersion, "gpuvet") {
		t.Fatalf("complete=%v engine=%s version=%q\n%s", s.Complete, s.Meta.Engine, s.Meta.EngineVersion, stderr.String())
	}
	eps := s.Hosts[0].Models[0].Endpoints
	if len(eps) != 2 {
		t.Fatalf("want 2 endpoints, got %d", len(eps))
	}
	for _, e := range eps {
		if e.Status == results.StatusFailed || e.Load == nil || e.Functional == nil || e.ProvisionSeconds <= 0 {
			t.Errorf("gpu %v: %s %q", e.GPUs, e.Status, e.Error)
		}
		log, _ := os.ReadFile(filepath.Join(out, e.LogFile))
		if !strings.Contains(string(log), "gpuvet sim") || !strings.Contains(string(log), fmt.Sprintf("CUDA_VISIBLE_DEVICES=%d", e.GPUs[0])) {
			t.Errorf("gpu %v: engine log %s lacks the engine's output:\n%s", e.GPUs, e.LogFile, log)
		}
	}
	if left := engineProcs(t, port); len(left) > 0 {
		t.Errorf("engines survived a finished run: %v", left)
	}
}

func TestRunKilledMidRunLeavesPartialResultsAndNoChild(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own random engine ports and folders: it waits on the run more than it computes
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			port := 20000 + rand.IntN(20000)
			// One GPU at a time (auto would load all three at once): GPU 0 recorded, GPU 1 serving.
			cmd := gpuvet(append(genericSimArgs(out, 3, port), "--parallel-gpus", "1")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until GPU 0 is recorded and GPU 1's engine runs, then kill gpuvet mid-run.
			deadline := time.Now().Add(90 * time.Second)
			for {
				s, err := results.Read(filepath.Join(out, "summary.json"))
				if err == nil && len(s.Hosts[0].Models) > 0 && len(s.Hosts[0].Models[0].Endpoints) == 1 && len(engineProcs(t, port)) > 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the run never reached GPU 1:\n%s", stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want exit code 1", err)
			}
			s, err := results.Read(filepath.Join(out, "summary.json"))
			if err != nil {
				t.Fatalf("a killed run must leave a valid summary.json: %v", err)
			}
			eps := s.Hosts[0].Models[0].Endpoints
			if s.Complete || !strings.Contains(s.Error, "interrupted") || len(eps) < 1 || eps[0].Load == nil {
				t.Errorf("want an incomplete summary keeping gpu 0: complete=%v error=%q endpoints=%d", s.Complete, s.Error, len(eps))
			}
			for i := 0; i < 50 && len(engineProcs(t, port)) > 0; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			if left := engineProcs(t, port); len(left) > 0 {
				t.Errorf("engine processes survived %s: %v\n%s", sig, left, stderr.String())
			}
		})
	}
}

func TestRunBadConfigExits2BeforeAnythingStarts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		env  string
		want string // in stderr, once
	}{
		{[]string{"run", "--sim", "--out", out, "--set", "load.max_concurency=3"}, "", "max_concurency"},
		{[]string{"run", "--sim", "--out", out, "--parallel-gpus", "0"}, "", "parallel_gpus"},
		{[]string{"run", "--sim", "--backend", "endpoint", "--out", out}, "", "exclude each other"},
		{[]string{"run", "--out", out, "-c", "/nonexistent.yaml"}, "", "/nonexistent.yaml"},
		{[]string{"run", "--sim", "--sim-gpu", "H900", "--out", out}, "", `--sim-gpu "H900"`},
		{[]string{"run", "--sim", "--model", "foo/bar", "--out", out}, "", `--model "foo/bar"`},
		{[]string{"run", "--out", out}, "", "no NVIDIA driver"},
		{[]string{"run", "--backend", "endpoint", "--url", "http://127.0.0.1:1", "--model", "m", "--out", out}, "", "endpoint http://127.0.0.1:1 does not answer"},
		{[]string{"run", "--sim", "--out", "/proc/nope/out"}, "", "--out /proc/nope/out"},
		{[]string{"run", "--sim", "--fail-on-flg", "--out", out}, "", "Did you mean this?\n\t--fail-on-flag"},
		{[]string{"rn", "--sim"}, "", "Did you mean this?\n\trun"},
		{[]string{"run", "--sim", "--out", out, "--baseline", "/nonexistent/baseline.json", "--fail-on-flag"}, "", "--baseline /nonexistent/baseline.json (run.baseline)"},
		{[]string{"run", "--sim", "--out", out, "--baseline", "/etc/hostname"}, "", "--baseline /etc/hostname (run.baseline)"},
		{[]string{"run", "--sim", "--out", out}, "GPUVET_LOAD_MAX_CONCURENCY=3", "did you mean GPUVET_LOAD_MAX_CONCURRENCY"},
	} {
		cmd := gpuvet(tc.args...)
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: want exit 2, got %v (%s)", tc.args, err, stderr.String())
		}
		if n := strings.Count(stderr.String(), "gpuvet:"); n != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: want one error saying %q, got %d:\n%s", tc.args, tc.want, n, stderr.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: the output directory was created before the plan was valid", tc.args)
		}
	}
}

// Two runs into one --out never overwrite each other silently: the second is refused (exit 2)
// while the first holds the lock or its results are there; --force replaces them, stale files
// (raw/…/gpu1.json of an earlier 2-GPU run) included, and removes nothing the earlier run did not
// write (a user's logs/app.log stays, and the run says so).
func TestRunOutputFolderIsLockedAndNotOverwritten(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	out := t.TempDir()
	args := []string{"run", "--sim", "--out", out, "--set", "load.max_duration=1s", "--set", "load.rates=1",
		"--set", "load.output_tokens=16", "--set", "functional.enabled=false", "--set", "history.enabled=false"}
	refused := func(args []string, want string) {
		t.Helper()
		var stderr bytes.Buffer
		cmd := gpuvet(args...)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 2 || !strings.Contains(stderr.String(), want) {
			t.Fatalf("%v: want exit 2 saying %q: %v %s", args, want, err, stderr.String())
		}
	}
	lock, _, err := pipeline.LockOutput(out, false) // another run holds the folder
	if err != nil {
		t.Fatal(err)
	}
	refused(append(args, "--sim-gpus", "1", "--force"), "another gpuvet run")
	lock.Release()
	if b, err := gpuvet(append(args, "--sim-gpus", "2")...).CombinedOutput(); err != nil {
		t.Fatalf("first run: %v\n%s", err, b)
	}
	stale, _ := filepath.Glob(filepath.Join(out, "raw", "*", "gpu1.json"))
	mine := filepath.Join(out, "logs", "app.log")
	if err := os.MkdirAll(filepath.Dir(mine), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, []byte("the user's"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(append(args, "--sim-gpus", "1"), "--force")
	b, err := gpuvet(append(args, "--sim-gpus", "1", "--force")...).CombinedOutput()
	if err != nil {
		t.Fatalf("--force: %v\n%s", err, b)
	}
	if len(stale) != 1 {
		t.Fatalf("the first run wrote no raw/*/gpu1.json: %v", stale)
	}
	if _, err := os.Stat(stale[0]); err == nil {
		t.Errorf("a stale raw file of an earlier run survived --force")
	}
	if _, err := os.Stat(mine); err != nil || !strings.Contains(string(b), "logs/app.log") {
		t.Errorf("--force removed a file no run wrote, or did not say it kept it: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err != nil {
		t.Errorf("no summary: %v", err)
	}
	refused(append(args, "--sim-gpus", "1"), "holds the results of run")
}

// config show says what model_cache.dir auto means for the engine kind, and that off turns it off.
func TestConfigShowModelCache(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		not  string
	}{
		{nil, []string{"model_cache.dir = auto", "# note: model_cache.dir auto is /data/hf/hub for engine kind vllm"}, ""},
		{[]string{"--set", "model_cache=off"}, []string{"model_cache.dir = off", "# flag:--set"}, "# note: model_cache"},
		{[]string{"--set", "engine.kind=generic", "--set", "engine.command=srv {port}"}, []string{"no managed model cache for engine kind generic"}, ""},
	} {
		cmd := gpuvet(append([]string{"config", "show"}, tc.args...)...)
		cmd.Env = append(cmd.Env, "HF_HUB_CACHE=/data/hf/hub")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: config show lacks %q:\n%s", tc.args, w, out)
			}
		}
		if tc.not != "" && strings.Contains(string(out), tc.not) {
			t.Errorf("%v: config show has %q:\n%s", tc.args, tc.not, out)
		}
	}
}

func TestConfigShowPrintsSources(t *testing.T) {
	cmd := gpuvet("config", "show", "--sim", "--set", "load.rates=7", "--parallel-gpus", "2")
	cmd.Env = append(cmd.Env, "GPUVET_LOAD_OUTPUT_TOKENS=99")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"backend = sim", "# flag:--sim", "load.rates = 7", "# flag:--set", "run.parallel_gpus = 2",
		"load.output_tokens = 99", "# env:GPUVET_LOAD_OUTPUT_TOKENS", "load.max_duration = 4s", "# default(sim)",
		"gates.ttft_p95_ms = 200", "# default",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config show lacks %q:\n%s", want, out)
		}
	}
	bad := gpuvet("config", "show", "--set", "gates.ttft_p95_ms=fast")
	if err := bad.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 2 {
		t.Errorf("a bad value must exit 2, got %v", err)
	}
}

// Every plan flag sets a config key (--sim sets backend by hand): a flag missing from flagPaths
// would be accepted and silently ignored.
func TestEveryPlanFlagHasAConfigPath(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	var pf planFlags
	pf.register(cmd)
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if len(flagPaths(fl.Name)) == 0 && fl.Name != "sim" {
			t.Errorf("--%s sets no config key", fl.Name)
		}
	})
}

// Issue 42: a named flag wins over --set of the same key whichever comes first, and the last of
// several --set wins; docs/config.md says exactly that.
func TestNamedFlagWinsOverSet(t *testing.T) {
	for _, args := range [][]string{
		{"--set", "run.parallel_gpus=1", "--parallel-gpus", "2"},
		{"--parallel-gpus", "2", "--set", "run.parallel_gpus=1"},
		{"--set", "run.parallel_gpus=1", "--set", "run.parallel_gpus=2"},
	} {
		out, err := gpuvet(append([]string{"config", "show", "--sim"}, args...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "run.parallel_gpus = 2") {
			t.Errorf("%v: %s", args, grepLine(string(out), "run.parallel_gpus"))
		}
	}
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "a named flag wins over `--set` of the same key, whichever comes first") {
		t.Error("docs/config.md does not say a named flag wins over --set")
	}
}

func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
