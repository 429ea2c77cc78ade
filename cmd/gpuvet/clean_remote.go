package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// The ssh and opennebula backends' cleaners: every object their manifests still list.
func init() {
	cleaners["ssh"] = cleanObjects
	cleaners["opennebula"] = cleanObjects
}

// removers remove one manifest object, by kind.
var removers = map[string]func(ctx context.Context, o fleet.Object) error{
	ssh.ObjectKind: func(ctx context.Context, o fleet.Object) error {
		return ssh.Clean(ctx, o, ssh.OptionsFrom(cleanPlan.Config.SSH))
	},
	opennebula.ObjectKind: func(ctx context.Context, o fleet.Object) error {
		c := cleanPlan.Config.OpenNebula
		auth, err := opennebula.Credentials(c.AuthEnv)
		if err != nil {
			return err
		}
		client, err := opennebula.NewClient(o.Host, auth) // the manifest names the endpoint
		if err != nil {
			return err
		}
		defer client.Close()
		return opennebula.Clean(ctx, client, o, opennebula.WaitsFrom(c))
	},
}

// cleanObjects removes every live object of the manifests, newest first, marking each as it
// goes; a manifest file goes when nothing of it is left. Anything left is an error naming it.
func cleanObjects(ctx context.Context, cmd *cobra.Command, _ string, ms []*fleet.Manifest) error {
	var errs []error
	gone := map[fleet.Object]bool{}
	for _, m := range ms {
		for _, o := range m.Live() {
			rm, ok := removers[o.Kind]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: no cleaner for %s in this gpuvet", m.Path(), o))
				continue
			}
			if err := rm(ctx, o); err != nil {
				errs = append(errs, fmt.Errorf("LEFT: %s: %v", o, err))
				continue
			}
			gone[o] = true
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", o)
		}
	}
	errs = append(errs, finishManifests(ms, func(o fleet.Object) bool { o.Deleted = false; return gone[o] }))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "clean: %d manifest(s), nothing left\n", len(ms))
	return nil
}
