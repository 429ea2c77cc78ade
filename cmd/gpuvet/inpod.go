package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/inpod"
)

// in-pod is what gpuvet's image runs in a Kubernetes Job: a subcommand, then its result file
// printed to the log between markers (internal/inpod's protocol); this is its command line.
func newInPodCmd() *cobra.Command {
	var plan, emit string
	cmd := &cobra.Command{
		Use:    "in-pod --emit FILE [--plan BASE64-YAML] -- SUBCOMMAND ARGS...",
		Short:  "Run a gpuvet subcommand in a pod and print its result file to the log between markers (used by --backend kubernetes)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return failedErr("%v", err)
			}
			code, err := inpod.Run(cmd.Context(), self, plan, emit, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
			var ue *inpod.UsageError
			switch {
			case errors.As(err, &ue):
				return usageErr("%v", err)
			case err != nil:
				return failedErr("%v", err)
			case code == exitBadUsage:
				return &exitError{code: exitBadUsage, err: fmt.Errorf("gpuvet %s: bad input", args[0])}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&plan, "plan", "", "the resolved plan as base64 YAML, passed to the subcommand with -c")
	cmd.Flags().StringVar(&emit, "emit", "", "the result file to print between markers when the subcommand ends (relative: in the subcommand's fresh working directory)")
	return cmd
}
