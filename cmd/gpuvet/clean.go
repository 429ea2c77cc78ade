package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

func init() { root.AddCommand(newCleanCmd()) }

// cleaner removes what runs of one backend left. Each multi-host backend registers one (in its
// own file): it gets the manifests of its killed runs (possibly none) and the run id asked for.
type cleaner func(ctx context.Context, cmd *cobra.Command, runID string, manifests []*fleet.Manifest) error

var cleaners = map[string]cleaner{}

func newCleanCmd() *cobra.Command {
	var backend, runID string
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what a killed multi-host run left behind (Kubernetes namespaces, …)",
		Long: `Removes every object a gpuvet run created and could not delete (it was killed, or its
connection broke): on Kubernetes the run's namespace and everything in it, found by the run label
(so it works without the run's manifest too), waiting until they are gone. The manifests of killed
runs (under $GPUVET_STATE_DIR, default ~/.local/state/gpuvet/runs) are removed once their objects are.

  gpuvet clean --kubeconfig ~/.kube/config              every gpuvet namespace
  gpuvet clean --kubeconfig ~/.kube/config --run ID     one run's`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ok := cleaners[backend]
			if !ok {
				return usageErr("--backend %s: want one of %v", backend, cleanerNames())
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var ms []*fleet.Manifest
			dir, err := fleet.StateDir()
			if err == nil {
				ms, err = fleet.Manifests(dir, backend, runID)
			}
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: run manifests:", err)
			}
			return c(ctx, cmd, runID, ms)
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "kubernetes", "the backend whose leftovers to remove")
	cmd.Flags().StringVar(&runID, "run", "", "only this run id (default: every gpuvet run)")
	registerKubeConnectFlags(cmd)
	return cmd
}

func cleanerNames() []string {
	var n []string
	for k := range cleaners {
		n = append(n, k)
	}
	return n
}

// finishManifests removes the manifests whose objects are all gone; gone tells whether an object
// is gone now.
func finishManifests(ms []*fleet.Manifest, gone func(fleet.Object) bool) error {
	var errs []error
	for _, m := range ms {
		for _, o := range m.Live() {
			if gone(o) {
				m.Deleted(o)
			}
		}
		errs = append(errs, m.Finish())
	}
	return errors.Join(errs...)
}
