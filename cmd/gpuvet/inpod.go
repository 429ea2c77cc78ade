package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/inpod"
)

// in-pod is what gpuvet's own image runs in a Kubernetes Job: a gpuvet subcommand, then its result
// file printed to the log between markers, where the CLI that started the Job reads it back.
func newInPodCmd() *cobra.Command {
	var plan, emit string
	cmd := &cobra.Command{
		Use:    "in-pod --emit FILE [--plan BASE64-YAML] -- SUBCOMMAND ARGS...",
		Short:  "Run a gpuvet subcommand in a pod and print its result file to the log between markers (used by --backend kubernetes)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if emit == "" {
				return usageErr("--emit: the result file to print is required")
			}
			// A fresh working directory: the subcommand's relative paths (its --out, the result file)
			// land there, so two of them never share files.
			dir, err := os.MkdirTemp("", "gpuvet-pod-")
			if err != nil {
				return failedErr("%v", err)
			}
			defer os.RemoveAll(dir)
			if !filepath.IsAbs(emit) {
				emit = filepath.Join(dir, emit)
			}
			if plan != "" {
				b, err := base64.StdEncoding.DecodeString(plan)
				if err != nil {
					return usageErr("--plan: not base64: %v", err)
				}
				f := filepath.Join(dir, "plan.yaml")
				if err := os.WriteFile(f, b, 0o600); err != nil {
					return failedErr("--plan: %v", err)
				}
				args = append([]string{args[0], "-c", f}, args[1:]...)
			}
			self, err := os.Executable()
			if err != nil {
				return failedErr("%v", err)
			}
			c := exec.CommandContext(cmd.Context(), self, args...)
			c.Dir = dir
			c.Stdout, c.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			runErr := c.Run()
			// The result is emitted whatever the exit code: a flagged or failed run still measured.
			b, err := os.ReadFile(emit)
			if err != nil {
				return failedErr("no result file %s (%v); the command: %v", emit, err, runErr)
			}
			if err := inpod.EmitResult(cmd.OutOrStdout(), b); err != nil {
				return failedErr("%v", err)
			}
			var ee *exec.ExitError
			if runErr != nil && !errors.As(runErr, &ee) {
				return failedErr("%v", runErr)
			}
			if ee != nil && ee.ExitCode() == exitBadUsage {
				return &exitError{code: exitBadUsage, err: fmt.Errorf("gpuvet %s: bad input", args[0])}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&plan, "plan", "", "the resolved plan as base64 YAML, passed to the subcommand with -c")
	cmd.Flags().StringVar(&emit, "emit", "", "the result file to print between markers when the subcommand ends (relative: in the subcommand's fresh working directory)")
	return cmd
}
