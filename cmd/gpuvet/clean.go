package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
)

// cleaner removes what runs of one backend left (remote.go's table holds each backend's): it gets
// the request and the manifests of the backend's killed runs (possibly none).
type cleaner func(ctx context.Context, req cleanRequest, manifests []*fleet.Manifest) error

// cleanRequest is what `gpuvet clean` was asked: the plan resolved from -c/--set/GPUVET_* and
// --kubeconfig/--context (SSH keys, the OpenNebula credentials variable, the cluster), the run id
// ("" every run), --cache and --untaint.
type cleanRequest struct {
	cmd     *cobra.Command
	plan    *config.Plan
	runID   string
	cache   bool
	untaint bool
}

func newCleanCmd() *cobra.Command {
	var backend, runID string
	var files []string
	var cache, untaint bool
	var cf configFlags
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what a killed multi-host run left behind (Kubernetes namespaces, remote folders, VMs, …)",
		Long: `A multi-host run writes every object to a run manifest before creating it (under
$GPUVET_STATE_DIR, default ~/.local/state/gpuvet/runs) and removes the manifest when everything is
gone. A run that was killed leaves it behind; clean removes what it still lists (on ssh hosts it
stops a run still going there first; OpenNebula VMs are terminated, recover-deleted as the last
resort), then the manifest. On Kubernetes (--kubeconfig/--context, or --backend kubernetes) it
also finds a run's namespace by its run label, so it works without the manifest too, and waits until
everything is gone. Safe to run twice.

A manifest is read only when it is gpuvet's (BACKEND-RUN.json with gpuvet's format marker, a regular
file under its size bound; a summary.json or anything else is refused, exit 2), and acted on only
when no run holds it (a live run's is left alone). Names are checked before any connection; what a
host changed is undone only when the host's own record vouches for it: docs/security.md.

  gpuvet clean                                   every manifest in the state directory
  gpuvet clean --run 20261130T110000Z            one run's
  gpuvet clean --manifest FILE                   a manifest file (repeatable)
  gpuvet clean --kubeconfig ~/.kube/config       every gpuvet namespace left on the cluster, too
  gpuvet clean --kubeconfig … --cache            and the kept model cache (its namespace and PVCs)
  gpuvet clean --untaint [--run ID]              and lift gpuvet's quarantine taints (--taint-failed)
                                                 from the nodes: gpuvet.io/unhealthy and its reason
                                                 annotation go, gpuvet.io/validation-pending takes
                                                 their place (released when a --gate run finds the
                                                 node ok: docs/acceptance.md); other taints and
                                                 every label stay

SSH settings (ssh.identity_file, ssh.known_hosts) and the OpenNebula credentials variable
(opennebula.auth_env, default ONE_AUTH) come from -c/--set/GPUVET_* as for run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var set []config.Flag // --kubeconfig, --context: above -c, --set and GPUVET_*, as for run
			for _, f := range []string{"kubeconfig", "context"} {
				if fl := cmd.Flags().Lookup(f); fl.Changed {
					set = append(set, config.Flag{Name: "--" + f, Path: kubeFlagPaths[f], Value: fl.Value.String()})
				}
			}
			plan, err := cf.plan(set...)
			if err != nil {
				return err
			}
			var label []string // backends that find leftovers without a manifest, by the run label
			if backend == "" && (untaint || plan.Config.Kubernetes.Kubeconfig != "" || plan.Config.Kubernetes.Context != "") {
				label = append(label, "kubernetes")
			}
			if untaint && backend != "" && backend != "kubernetes" {
				return usageErr("--untaint lifts taints from Kubernetes nodes: it goes with --backend kubernetes (or no --backend), not %s", backend)
			}
			byBackend, err := cleanManifests(cmd, backend, label, runID, files)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var errs []error
			for _, b := range sortedKeys(byBackend) {
				fb, ok := fleetBackends[b]
				if !ok {
					errs = append(errs, fmt.Errorf("manifests of backend %s: this gpuvet has no cleaner for it", b))
					continue
				}
				errs = append(errs, fb.clean(ctx, cleanRequest{cmd: cmd, plan: plan, runID: runID, cache: cache, untaint: untaint}, byBackend[b]))
			}
			if err := errors.Join(errs...); err != nil {
				for _, e := range errs { // a cleaner that refused bad input before doing anything: exit 2
					if ee := (*exitError)(nil); errors.As(e, &ee) && ee.code == exitBadUsage {
						return usageErr("%v", err)
					}
				}
				return failedErr("%v", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "only this backend's leftovers (default: every backend with manifests)")
	cmd.Flags().StringVar(&runID, "run", "", "only this run id (default: every gpuvet run)")
	cmd.Flags().StringArrayVar(&files, "manifest", nil, "clean the run of this manifest file (repeatable)")
	cmd.Flags().BoolVar(&untaint, "untaint", false, "backend kubernetes: also lift the gpuvet.io/unhealthy taints (and their reason annotation) that --taint-failed put on nodes (every run's, or --run's), putting gpuvet.io/validation-pending:NoSchedule in their place: the node takes work once a run finds it ok (--gate); nothing else on the node changes")
	cmd.Flags().BoolVar(&cache, "cache", false, "backend kubernetes: also delete the namespaces that keep the model cache between runs (kubernetes.cache_namespace), with their PVCs")
	cf.register(cmd)
	registerKubeConnectFlags(cmd.Flags())
	return cmd
}

// cleanManifests gathers the manifests to clean, by backend: the files given, else the state
// directory's (filtered by backend and run id). The backend asked for, and those in label, are
// listed even with no manifest, for cleaners that find leftovers without one (Kubernetes, by label).
func cleanManifests(cmd *cobra.Command, backend string, label []string, runID string, files []string) (map[string][]*fleet.Manifest, error) {
	out := map[string][]*fleet.Manifest{}
	for _, b := range append(label, backend) {
		if b != "" {
			out[b] = nil
		}
	}
	if len(files) > 0 {
		for _, f := range files {
			m, err := fleet.ReadManifest(f)
			if err != nil {
				return nil, usageErr("%v", err)
			}
			if err := m.Claim(); err != nil {
				return nil, usageErr("%v", err)
			}
			out[m.Backend] = append(out[m.Backend], m)
		}
		return out, nil
	}
	dir, err := fleet.StateDir()
	if err != nil {
		return nil, usageErr("%v", err)
	}
	ms, err := fleet.Manifests(dir, backend, runID)
	if err != nil { // a file there that is not gpuvet's: nothing is cleaned until it is gone
		return nil, usageErr("run manifests: %v", err)
	}
	for _, m := range ms {
		// Only a manifest clean holds is acted on: a live run's is left to it.
		if err := m.Claim(); err != nil {
			if runID != "" {
				return nil, usageErr("%v", err)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "warning: run manifest left alone:", err)
			continue
		}
		out[m.Backend] = append(out[m.Backend], m)
	}
	if len(out) == 0 {
		if runID != "" {
			return nil, usageErr("no manifest for run %s in %s", runID, dir)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "clean: no run manifest in %s, nothing to clean\n", dir)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
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
