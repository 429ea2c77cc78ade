package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

func init() { root.AddCommand(newCleanCmd()) }

// cleaners remove one manifest object of a backend; each backend registers its own.
var cleaners = map[string]func(ctx context.Context, p *config.Plan, o fleet.Object) error{
	ssh.ObjectKind: func(ctx context.Context, p *config.Plan, o fleet.Object) error {
		return ssh.Clean(ctx, o, ssh.OptionsFrom(p.Config.SSH))
	},
	opennebula.ObjectKind: func(ctx context.Context, p *config.Plan, o fleet.Object) error {
		auth, err := opennebula.Credentials(p.Config.OpenNebula.AuthEnv)
		if err != nil {
			return err
		}
		c, err := opennebula.NewClient(o.Host, auth)
		if err != nil {
			return err
		}
		defer c.Close()
		return opennebula.Clean(ctx, c, o, opennebula.WaitsFrom(p.Config.OpenNebula))
	},
}

func newCleanCmd() *cobra.Command {
	var cf configFlags
	var manifests []string
	var runID string
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what a killed fleet run left (remote folders, VMs), from its run manifest",
		Long: `A fleet run (backends ssh, opennebula) writes every object to a run manifest before creating
it, and removes the manifest when everything is gone. A run that was killed leaves it behind;
clean removes what it still lists and then the manifest. Safe to run twice.

  gpuvet clean --manifest ~/.local/state/gpuvet/runs/opennebula-20261130T110000Z.json
  gpuvet clean --run 20261130T110000Z        (the manifest in $GPUVET_STATE_DIR or ~/.local/state/gpuvet/runs)
  gpuvet clean                               (every manifest there)

SSH settings (ssh.identity_file, ssh.known_hosts) and the OpenNebula credentials variable
(opennebula.auth_env, default ONE_AUTH) come from -c/--set/GPUVET_* as for run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			plan, err := cf.plan()
			if err != nil {
				return err
			}
			var ms []*fleet.Manifest
			for _, f := range manifests {
				m, err := fleet.ReadManifest(f)
				if err != nil {
					return usageErr("%v", err)
				}
				ms = append(ms, m)
			}
			if len(manifests) == 0 {
				dir, err := fleet.StateDir()
				if err != nil {
					return usageErr("%v", err)
				}
				found, err := fleet.Manifests(dir, "", runID)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "gpuvet: WARNING:", err)
				}
				if len(found) == 0 && runID != "" {
					return usageErr("no manifest for run %s in %s", runID, dir)
				}
				ms = found
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var errs []error
			for _, m := range ms {
				errs = append(errs, cleanManifest(ctx, cmd, plan, m))
			}
			if err := errors.Join(errs...); err != nil {
				return failedErr("%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "clean: %d manifest(s), nothing left\n", len(ms))
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringArrayVar(&manifests, "manifest", nil, "a run manifest to clean (repeatable)")
	cmd.Flags().StringVar(&runID, "run", "", "clean the manifest of this run id from the state directory")
	return cmd
}

// cleanManifest removes every live object of one manifest, newest first, marking each as it goes;
// the manifest file goes when nothing is left.
func cleanManifest(ctx context.Context, cmd *cobra.Command, plan *config.Plan, m *fleet.Manifest) error {
	var errs []error
	for _, o := range m.Live() {
		clean, ok := cleaners[o.Kind]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no cleaner for kind %s in this build", m.Path(), o.Kind))
			continue
		}
		if err := clean(ctx, plan, o); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", o, err))
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", o)
		if err := m.Deleted(o); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, m.Finish())
	}
	return errors.Join(errs...)
}
