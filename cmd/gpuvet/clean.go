package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/registry"
)

func newCleanCmd() *cobra.Command {
	var backend, runID string
	var files []string
	var cache, untaint, forget bool
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
  gpuvet clean --run ID --forget                 drop a run's manifest, removing nothing (what
                                                 clean can never remove and you removed by hand)
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
			var set []config.Flag // a backend's connection flags (--kubeconfig, --context): above -c, --set and GPUVET_*, as for run
			cmd.Flags().Visit(func(fl *pflag.Flag) {
				for _, key := range backendkind.FlagKeys(fl.Name) {
					set = append(set, config.Flag{Name: "--" + fl.Name, Path: key, Value: fl.Value.String()})
				}
			})
			plan, err := cf.plan(set...)
			if err != nil {
				return err
			}
			label, err := cleanByLabel(plan, backend, untaint)
			if err != nil {
				return err
			}
			if forget && runID == "" && len(files) == 0 {
				return usageErr("--forget drops one run's manifest without removing what it lists: name the run with --run or the file with --manifest")
			}
			byBackend, err := fleet.GatherManifests(backend, label, runID, files, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return usageErr("%v", err)
			}
			if forget {
				return forgetManifests(cmd.OutOrStdout(), byBackend)
			}
			ctx, stop := interruptible(context.Background())
			defer stop()
			req := fleet.CleanRequest{Plan: plan, RunID: runID, Cache: cache, Untaint: untaint, Out: cmd.OutOrStdout()}
			return fleetErr(fleet.CleanBackends(ctx, req, byBackend, func(name string) (fleet.Cleaner, bool) {
				b, ok := registry.Get(name)
				return b.Clean, ok && b.Clean != nil
			}))
		},
	}
	cmd.Flags().BoolVar(&forget, "forget", false, "drop the run's manifest (--run or --manifest) without removing what it lists, naming each: for objects clean cannot remove (a host gone for good, a record that does not vouch) that you removed by hand")
	cmd.Flags().StringVar(&backend, "backend", "", "only this backend's leftovers (default: every backend with manifests)")
	cmd.Flags().StringVar(&runID, "run", "", "only this run id (default: every gpuvet run)")
	cmd.Flags().StringArrayVar(&files, "manifest", nil, "clean the run of this manifest file (repeatable)")
	cmd.Flags().BoolVar(&untaint, "untaint", false, "backend kubernetes: also lift the gpuvet.io/unhealthy taints (and their reason annotation) that --taint-failed put on nodes (every run's, or --run's), putting gpuvet.io/validation-pending:NoSchedule in their place: the node takes work once a run finds it ok (--gate); nothing else on the node changes")
	cmd.Flags().BoolVar(&cache, "cache", false, "backend kubernetes: also delete the namespaces that keep the model cache between runs (kubernetes.cache_namespace), with their PVCs")
	cf.register(cmd)
	for _, name := range registry.Names() {
		if b, _ := registry.Get(name); b.CleanFlags != nil {
			b.CleanFlags(cmd.Flags())
		}
	}
	return cmd
}

// cleanByLabel lists the backends that find leftovers by the run label (FindsByLabel), without
// --backend, when their connection is configured or --untaint asks; with --backend, --untaint goes
// only with a backend whose runs taint nodes.
func cleanByLabel(plan *config.Plan, backend string, untaint bool) ([]string, error) {
	if backend != "" {
		if untaint && !backendkind.Of(backend).Untaint {
			return nil, usageErr("--untaint lifts taints from Kubernetes nodes: it goes with --backend kubernetes (or no --backend), not %s", backend)
		}
		return nil, nil
	}
	var label []string
	for _, k := range backendkind.Kinds {
		if k.FindsByLabel && (untaint || slices.ContainsFunc(k.ConnectKeys, func(key string) bool { return plan.Text(key) != "" })) {
			label = append(label, k.Name)
		}
	}
	return label, nil
}

// forgetManifests drops each manifest gathered, naming every object it still listed: nothing on a
// host or cluster is touched.
func forgetManifests(w io.Writer, byBackend map[string][]*fleet.Manifest) error {
	var errs []error
	for _, ms := range byBackend {
		for _, m := range ms {
			live, err := m.Forget()
			for _, o := range live {
				fmt.Fprintf(w, "forgot (not removed, yours to check): %s\n", o)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(w, "clean: dropped manifest %s (%d object(s) it listed were not touched)\n", m.Path(), len(live))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return failedErr("%v", err)
	}
	return nil
}
