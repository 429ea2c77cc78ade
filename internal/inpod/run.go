package inpod

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Command is the argv of a gpuvet Job's container: `gpuvet in-pod` runs the subcommand sub with
// plan (the node's resolved plan as base64 YAML, "" none) as its -c file, then prints the result
// file emit between the markers. The Kubernetes backend builds every Job's argv with it; the
// command's in-pod subcommand parses it and calls Run.
func Command(plan, emit string, sub ...string) []string {
	args := []string{"in-pod"}
	if plan != "" {
		args = append(args, "--plan", plan)
	}
	return append(append(args, "--emit", emit, "--"), sub...)
}

// UsageError is what is wrong with in-pod's own arguments (the command exits 2).
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Run runs `self args...` (a gpuvet subcommand) in a fresh working directory, so its relative paths
// (its --out, the result file) land there and two of them never share files; with plan decoded
// into a file given as -c; then writes the result file emit to stdout between the markers,
// whatever the subcommand's exit code (a flagged or failed run still measured). It returns the
// subcommand's exit code; an error when it could not run or left no result.
func Run(ctx context.Context, self, plan, emit string, args []string, stdout, stderr io.Writer) (int, error) {
	if emit == "" {
		return 0, &UsageError{"--emit: the result file to print is required"}
	}
	if len(args) == 0 {
		return 0, &UsageError{"no subcommand to run"}
	}
	var yml []byte
	if plan != "" {
		var err error
		if yml, err = base64.StdEncoding.DecodeString(plan); err != nil {
			return 0, &UsageError{fmt.Sprintf("--plan: not base64: %v", err)}
		}
	}
	dir, err := os.MkdirTemp("", "gpuvet-pod-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if !filepath.IsAbs(emit) {
		emit = filepath.Join(dir, emit)
	}
	if plan != "" {
		f := filepath.Join(dir, "plan.yaml")
		if err := os.WriteFile(f, yml, 0o600); err != nil {
			return 0, fmt.Errorf("--plan: %w", err)
		}
		args = append([]string{args[0], "-c", f}, args[1:]...)
	}
	c := exec.CommandContext(ctx, self, args...)
	c.Dir = dir
	c.Stdout, c.Stderr = stdout, stderr
	runErr := c.Run()
	b, err := os.ReadFile(emit)
	if err != nil {
		ended := "exit status 0"
		if runErr != nil {
			ended = runErr.Error()
		}
		return 0, fmt.Errorf("no result file %s (%w); the command ended: %s", emit, err, ended)
	}
	if err := EmitResult(stdout, b); err != nil {
		return 0, err
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, runErr
}
