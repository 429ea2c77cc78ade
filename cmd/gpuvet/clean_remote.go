package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// The ssh and opennebula backends' cleaner (remote.go's table): every object their manifests still list.

// remover removes one object of manifest m with the settings of plan; say reports a step
// (collected results).
type remover func(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, say func(string)) error

// removers remove one manifest object, by kind. A manifest is a file anyone may have edited:
// what it names is checked before anything is sent or deleted.
var removers = map[string]remover{
	ssh.ObjectKind: func(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, say func(string)) error {
		return ssh.Clean(ctx, o, m.RunID, m.Target["output"], ssh.OptionsFrom(plan.Config.SSH), say)
	},
	opennebula.ObjectKind: func(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, _ func(string)) error {
		c := plan.Config.OpenNebula
		// The credentials go only to the front-end the config names: a manifest naming another is
		// refused (it could be anyone's).
		if c.Endpoint == "" || c.Endpoint != o.Host {
			return fmt.Errorf("the manifest names OpenNebula front-end %s; $%s is sent only to the front-end the config names (now %q): confirm it with --set opennebula.endpoint=%s (or GPUVET_OPENNEBULA_ENDPOINT)",
				o.Host, c.AuthEnv, c.Endpoint, o.Host)
		}
		if !strings.HasPrefix(o.Name, "gpuvet-"+m.RunID+"-") {
			return fmt.Errorf("VM name %q does not carry run %s (gpuvet-%s-…): not gpuvet's, left alone", o.Name, m.RunID, m.RunID)
		}
		auth, err := opennebula.Credentials(c.AuthEnv)
		if err != nil {
			return err
		}
		client, err := opennebula.NewClient(plan.OpenNebulaEndpoint, auth)
		if err != nil {
			return err
		}
		defer client.Close()
		return opennebula.Clean(ctx, client, o, opennebula.WaitsFrom(c))
	},
}

// cleanParallel bounds how many objects are removed at once (VMs take a while to reach DONE).
const cleanParallel = 8

// cleanObjects removes every live object of the manifests, in parallel (bounded), marking each as
// it goes; a manifest file goes when nothing of it is left. Run folders go first (their partial
// results are collected then), the machines that hold them after: a folder in a VM that could not
// be reached is gone with its VM. Anything left is an error naming it.
func cleanObjects(ctx context.Context, req cleanRequest, ms []*fleet.Manifest) error {
	cmd := req.cmd
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(cmd.OutOrStdout(), line)
	}
	type item struct {
		m *fleet.Manifest
		o fleet.Object
	}
	var folders, rest []item
	var errs []error
	for _, m := range ms {
		for _, o := range m.Live() {
			if _, ok := removerFor(o.Kind); !ok {
				errs = append(errs, fmt.Errorf("%s: no cleaner for %s in this gpuvet", m.Path(), o))
			} else if o.Kind == ssh.ObjectKind {
				folders = append(folders, item{m, o})
			} else {
				rest = append(rest, item{m, o})
			}
		}
	}
	gone := map[fleet.Object]bool{}
	failed := map[fleet.Object]error{}
	removeAll := func(items []item) {
		sem := make(chan struct{}, cleanParallel)
		var wg sync.WaitGroup
		for _, it := range items {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				rm, _ := removerFor(it.o.Kind)
				err := rm(ctx, req.plan, it.m, it.o, say)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed[it.o] = err
					return
				}
				gone[it.o] = true
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", it.o)
			}()
		}
		wg.Wait()
	}
	removeAll(folders)
	removeAll(rest)
	removedVMs := map[string]bool{}
	for o := range gone {
		if o.Kind == opennebula.ObjectKind {
			removedVMs[o.Name] = true
		}
	}
	for _, it := range append(folders, rest...) {
		err, bad := failed[it.o]
		switch {
		case !bad:
		case it.o.On != "" && removedVMs[it.o.On]:
			gone[it.o] = true
			say(fmt.Sprintf("removed %s with VM %s (its partial results could not be collected: %v)", it.o, it.o.On, err))
		default:
			errs = append(errs, fmt.Errorf("LEFT: %s: %v", it.o, err))
		}
	}
	errs = append(errs, finishManifests(ms, func(o fleet.Object) bool { o.Deleted = false; return gone[o] }))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "clean: %d manifest(s), nothing left\n", len(ms))
	return nil
}

// removerFor is how clean removes an object of kind: a backend's own, or host preparation's
// (every kind of hostprep and vfio goes through cleanHostPrep).
func removerFor(kind string) (remover, bool) {
	if rm, ok := removers[kind]; ok {
		return rm, true
	}
	if slices.Contains(prepKinds, kind) {
		return cleanHostPrep, true
	}
	return nil, false
}
