package main

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/sim"
)

// Every command follows the README's exit codes: 2 when an input is wrong or the command cannot
// start (nothing measured: an unreachable endpoint, a port in use, a file that is not a summary),
// 1 when it ran and found a failure. The same input gets the same code from every command.
func TestExitCodesAgreeAcrossCommands(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	srv, err := sim.Listen(sim.Config{TTFT: time.Millisecond, ITL: time.Millisecond, Model: "m"}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	const down = "http://127.0.0.1:1" // nothing listens there
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench", "--url", down, "--model", "m", "--profile", "synchronous", "--max-requests", "1"}, 2, "does not answer"},
		{[]string{"run", "--backend", "endpoint", "--url", down, "--model", "m", "--out", filepath.Join(dir, "a")}, 2, "does not answer"},
		{[]string{"bench", "--url", srv.URL(), "--model", "other", "--profile", "synchronous", "--max-requests", "1"}, 2, `model "other" is not served`},
		{[]string{"run", "--backend", "endpoint", "--url", srv.URL(), "--model", "other", "--out", filepath.Join(dir, "b")}, 2, `model "other" is not served`},
		{[]string{"sim", "--gpu", "H200", "--model", "Qwen/Qwen3-8B", "--port", busyPort}, 2, "listen on"},
		{[]string{"report", "/etc/hostname", "--html", filepath.Join(dir, "r.html")}, 2, "reading the summary"},
		{[]string{"compare", "/etc/hostname", "/etc/hostname"}, 2, "/etc/hostname"},
		{[]string{"calibrate", "/etc/hostname"}, 2, "/etc/hostname"},
		{[]string{"health", "--sim", "--sim-gpus", "0"}, 2, "--sim-gpus"},
		// Issue 51: health and run name the simulated GPU count alike; the old name still works,
		// run's did-you-mean points at it, and a bad model names its flag, not a Go slice.
		{[]string{"health", "--sim", "--sim-count", "0"}, 2, "use --sim-gpus"},
		{[]string{"run", "--sim", "--sim-count", "2"}, 2, "Did you mean this?\n\t--sim-gpus"},
		{[]string{"run", "--sim", "--sim-gpu-count", "2"}, 2, "Did you mean this?\n\t--sim-gpus"}, // not --gpu-count, nor --sim-gpu (the model)
		{[]string{"health", "--sim", "--sim-gpu", "2"}, 2, "--sim-gpu: unknown GPU \"2\"; known: A100, "},
		// Issue 42: a user@ or :port in --hosts is a bad flag, not an unreachable host.
		{[]string{"run", "--backend", "ssh", "--hosts", "root@10.0.0.1:2222", "--out", filepath.Join(dir, "h")}, 2, "--set ssh.user=root --set ssh.port=2222"},
		{[]string{"run", "--backend", "ssh", "--hosts", "gpu1,gpu2:22", "--out", filepath.Join(dir, "h2")}, 2, "--set ssh.port=22"},
		// probe's finding is the completion itself: a server that returns none is exit 1.
		{[]string{"probe", "--url", down, "--model", "m", "--wait", "0s"}, 1, "returned no completion"},
		{[]string{"probe", down, "--model", "m", "--wait", "0s"}, 1, "returned no completion"}, // the URL as an argument
		{[]string{"probe", "localhost:8000", "--model", "m"}, 2, "not a server URL"},
	} {
		cmd := gpuvet(tc.args...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d), output lacks %q:\n%s", tc.args, code, tc.code, tc.want, stderr.String())
		}
	}
}
