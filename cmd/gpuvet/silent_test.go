package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// pgidsFromPidFiles reads the process groups the engine pid files under out record.
func pgidsFromPidFiles(out string) []int {
	var pg []int
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".pid") {
			var f struct {
				PGID int `json:"pgid"`
			}
			if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &f) == nil && f.PGID > 1 {
				pg = append(pg, f.PGID)
			}
		}
		return nil
	})
	return pg
}

// liveInGroup counts the live (not zombie) processes of process group pgid.
func liveInGroup(pgid int) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); !strings.Contains(string(st), ") Z ") {
				n++
			}
		}
	}
	return n
}

// withShellEngine launches the generic-sim engine of args through `sh -c 'PRE exec ENGINE'`
// (PRE ends with "&" or ";").
func withShellEngine(args []string, pre string) []string {
	for i, a := range args {
		if a == "--engine-cmd" {
			args[i+1] = "sh -c '" + pre + " exec " + args[i+1] + "'"
		}
	}
	return args
}

// kill -9 of gpuvet, with the engine launched through a shell that forks (as vLLM and SGLang fork
// workers): no process of the engine survives.
func TestRunKill9ThroughForkingShellLeavesNoEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	out := t.TempDir()
	port := 20000 + rand.IntN(20000)
	args := withShellEngine(genericSimArgs(out, 1, port), "sleep 1000 & sleep 1000 &")
	cmd := gpuvet(append(args, "--set", "load.max_duration=30s")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pgids []int
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if pgids = pgidsFromPidFiles(out); len(pgids) > 0 && liveInGroup(pgids[0]) >= 3 && len(engineProcs(t, port)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the engine never started: %s", stderr.String())
		}
	}
	defer syscall.Kill(-pgids[0], syscall.SIGKILL)
	cmd.Process.Kill()
	cmd.Wait()
	for i := 0; i < 200 && liveInGroup(pgids[0]) > 0; i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if n := liveInGroup(pgids[0]); n > 0 {
		t.Fatalf("after kill -9 of gpuvet, %d processes of the engine's group %d survive", n, pgids[0])
	}
}

// A canary hub token in the environment (printed by the engine, on a line longer than the 64 KiB
// cut) and a password in the endpoint URL appear in no file gpuvet writes.
func TestRunSecretCanary(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own ports and folders; it waits on the runs more than it computes
	const token, password = "hf_CanaryToken0123456789abcdef", "CanaryPassw0rd77"

	// An engine that prints the token, once on a short line and once 70000 bytes into a long one.
	engOut := t.TempDir()
	port := 20000 + rand.IntN(20000)
	args := withShellEngine(genericSimArgs(engOut, 1, port), `echo token=$HF_TOKEN; printf "%070000d$HF_TOKEN%070000d\n" 0 0;`)
	cmd := gpuvet(args...)
	cmd.Env = append(cmd.Env, "HF_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	cmd.Run()

	// An endpoint whose URL carries user:password.
	srv, err := sim.Listen(sim.Config{TTFT: 2 * time.Millisecond, ITL: time.Millisecond, Model: "m"}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	epOut := t.TempDir()
	url := strings.Replace(srv.URL(), "http://", "http://gpuvet:"+password+"@", 1)
	cmd = gpuvet("run", "--backend", "endpoint", "--url", url, "--model", "m", "--out", epOut,
		"--set", "load.max_duration=500ms", "--set", "load.rates=1", "--set", "load.prompt_tokens=16",
		"--set", "load.output_tokens=8", "--set", "load.max_concurrency=2", "--set", "engine.max_model_len=64")
	cmd.Env = append(cmd.Env, "HF_TOKEN="+token)
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	cmd.Run()

	if strings.Contains(stderr.String(), token) || strings.Contains(stderr.String(), password) {
		t.Errorf("gpuvet's own output carries a canary")
	}
	files := 0
	for _, out := range []string{engOut, epOut} {
		filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			files++
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(password)) {
				t.Errorf("%s carries a canary", p)
			}
			return nil
		})
	}
	for _, want := range []string{"summary.json", "report.html"} {
		for _, out := range []string{engOut, epOut} {
			if _, err := os.Stat(filepath.Join(out, want)); err != nil {
				t.Errorf("no %s: the canary check would be empty\n%s", want, stderr.String())
			}
		}
	}
	if log, _ := filepath.Glob(filepath.Join(engOut, "logs", "*", "*.log")); len(log) == 0 {
		t.Errorf("no engine log written")
	} else if b, _ := os.ReadFile(log[0]); !bytes.Contains(b, []byte("token=[REDACTED]")) {
		t.Errorf("the engine log lacks the redacted token line")
	}
	if s, _ := os.ReadFile(filepath.Join(epOut, "summary.json")); !bytes.Contains(s, []byte(strings.TrimPrefix(srv.URL(), "http://"))) {
		t.Errorf("summary.json does not record the endpoint URL at all")
	}
}

// The audit's fault run: a server answering 30 % 500s and cutting 20 % of its streams. Its
// failed requests are the engine's (no evidence about a GPU): far above gates.max_error_rate_pct,
// the run fails on the engine layer (exit 1, issue 50), names the engine and says why, with the
// errors by kind.
func TestRunWithLoadErrorsNamesTheEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	srv, err := sim.Listen(sim.Config{TTFT: 2 * time.Millisecond, ITL: time.Millisecond, Model: "m", Seed: 7,
		Faults: sim.Faults{Rate5xx: 0.3, CutRate: 0.2}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := t.TempDir()
	cmd := gpuvet("run", "--backend", "endpoint", "--url", srv.URL(), "--model", "m", "--out", out,
		"--set", "load.max_duration=500ms", "--set", "load.rates=1", "--set", "load.prompt_tokens=16",
		"--set", "load.output_tokens=8", "--set", "load.max_concurrency=2", "--set", "engine.max_model_len=64",
		"--set", "functional.enabled=false", "--fail-on-inconclusive")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1 (the engine failed):\n%s", err, stdout.String())
	}
	for _, want := range []string{"status failed", "by layer: engine failed", "engine failed · fix the engine or its configuration: [judge.engine_fault]", "the engine misbehaved: ", "HTTP 500 server error", "stream cut without a finish reason", "request #"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout.String())
		}
	}
}

// The password of an endpoint URL is the API key only when the key variable is empty.
func TestEndpointURLKeyPrefersEnv(t *testing.T) {
	for _, tc := range []struct{ env, want string }{{"", "urlpass99"}, {"envkey123", "envkey123"}} {
		t.Setenv("OPENAI_API_KEY", tc.env)
		p, err := config.Load(config.Options{Flags: []config.Flag{{Name: "--url", Path: "endpoint.url", Value: "http://u:urlpass99@127.0.0.1:8000"},
			{Name: "--backend", Path: "backend", Value: "endpoint"}}})
		if err != nil {
			t.Fatal(err)
		}
		useEndpointURLKey(p)
		if got := os.Getenv(p.Config.Endpoint.APIKeyEnv); got != tc.want || strings.Contains(p.Config.Endpoint.URL, "urlpass99") {
			t.Errorf("env %q: key %q (want %q), url %s", tc.env, got, tc.want, p.Config.Endpoint.URL)
		}
	}
}
