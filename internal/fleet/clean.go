package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/gpuvet/gpuvet/internal/config"
)

// CleanRequest is what `gpuvet clean` was asked: the plan (-c/--set/GPUVET_* and the connection
// flags), the run id ("": every run), --cache and --untaint, and where to say what was removed.
type CleanRequest struct {
	Plan    *config.Plan
	RunID   string
	Cache   bool
	Untaint bool
	Out     io.Writer
}

// Cleaner removes what one backend's killed runs left, from their manifests (possibly none: a
// backend that finds leftovers by label). An *InputError is bad input, found before any removal.
type Cleaner func(ctx context.Context, req CleanRequest, manifests []*Manifest) error

// CleanBackends runs each backend's cleaner (false: none in this gpuvet) over its manifests, in
// name order. The error joins every backend's: an *InputError when one refused bad input.
func CleanBackends(ctx context.Context, req CleanRequest, byBackend map[string][]*Manifest, cleaner func(backend string) (Cleaner, bool)) error {
	var errs []error
	for _, b := range slices.Sorted(maps.Keys(byBackend)) {
		clean, ok := cleaner(b)
		if !ok {
			errs = append(errs, fmt.Errorf("manifests of backend %s: this gpuvet has no cleaner for it", b))
			continue
		}
		errs = append(errs, clean(ctx, req, byBackend[b]))
	}
	err := errors.Join(errs...)
	for _, e := range errs { // a cleaner that refused bad input before doing anything: exit 2
		if ie := (*InputError)(nil); errors.As(e, &ie) {
			return &InputError{err}
		}
	}
	return err
}

// GatherManifests gathers the manifests to clean, by backend: the files given, else the state
// directory's (by backend and run id), each claimed (a live run's is left to it, said on warn).
// backend and those in label are listed even without a manifest (Kubernetes finds leftovers by
// label). Errors are *InputError.
func GatherManifests(backend string, label []string, runID string, files []string, out, warn io.Writer) (map[string][]*Manifest, error) {
	byBackend := map[string][]*Manifest{}
	for _, b := range append(label, backend) {
		if b != "" {
			byBackend[b] = nil
		}
	}
	if len(files) > 0 {
		for _, f := range files {
			m, err := ReadManifest(f)
			if err != nil {
				return nil, &InputError{err}
			}
			if err := m.Claim(); err != nil {
				return nil, &InputError{err}
			}
			byBackend[m.Backend] = append(byBackend[m.Backend], m)
		}
		return byBackend, nil
	}
	dir, err := StateDir()
	if err != nil {
		return nil, &InputError{err}
	}
	ms, err := Manifests(dir, backend, runID)
	if err != nil { // a file there that is not gpuvet's: nothing is cleaned until it is gone
		return nil, &InputError{fmt.Errorf("run manifests: %w", err)}
	}
	for _, m := range ms {
		// Only a manifest clean holds is acted on: a live run's is left to it.
		if err := m.Claim(); err != nil {
			if runID != "" {
				return nil, &InputError{err}
			}
			fmt.Fprintln(warn, "warning: run manifest left alone:", err)
			continue
		}
		byBackend[m.Backend] = append(byBackend[m.Backend], m)
	}
	if len(byBackend) == 0 {
		if runID != "" {
			return nil, &InputError{fmt.Errorf("no manifest for run %s in %s", runID, dir)}
		}
		fmt.Fprintf(out, "clean: no run manifest in %s, nothing to clean\n", dir)
	}
	return byBackend, nil
}

// FinishManifests removes the manifests whose objects are all gone; gone tells whether an object
// is gone now.
func FinishManifests(ms []*Manifest, gone func(Object) bool) error {
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

// Remover removes one object of manifest m with the settings of plan; say reports a step. What a
// manifest names is checked before anything is sent or deleted (anyone may have edited it).
type Remover func(ctx context.Context, plan *config.Plan, m *Manifest, o Object, say func(string)) error

// Removers are a backend's removers, by object kind, for one clean.
type Removers struct {
	ByKind map[string]Remover
	// First are the kinds removed before every other (run folders: their partial results are
	// collected before the machine that holds them goes).
	First []string
	// Holders are the kinds of machines other objects live on (Object.On, a VM): an object that
	// could not be removed is gone with its holder once that is removed.
	Holders []string
}

// CleanParallel bounds how many objects are removed at once (VMs take a while to reach DONE).
const CleanParallel = 8

// ObjectCleaner is the cleaner of a backend whose manifests list every object (ssh, opennebula),
// with removers' removers for each clean (they may hold locks of their own): every live object goes,
// in bounded parallel, First kinds first, each marked as it goes; a manifest file goes when
// nothing of it is left. Anything left is an error naming it.
func ObjectCleaner(removers func() Removers) Cleaner {
	return func(ctx context.Context, req CleanRequest, ms []*Manifest) error {
		return cleanObjects(ctx, req, ms, removers())
	}
}

func cleanObjects(ctx context.Context, req CleanRequest, ms []*Manifest, rs Removers) error {
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(req.Out, line)
	}
	type item struct {
		m *Manifest
		o Object
	}
	var first, rest []item
	var errs []error
	for _, m := range ms {
		for _, o := range m.Live() {
			if _, ok := rs.ByKind[o.Kind]; !ok {
				errs = append(errs, fmt.Errorf("%s: no cleaner for %s in this gpuvet", m.Path(), o))
			} else if slices.Contains(rs.First, o.Kind) {
				first = append(first, item{m, o})
			} else {
				rest = append(rest, item{m, o})
			}
		}
	}
	gone := map[Object]bool{}
	failed := map[Object]error{}
	removeAll := func(items []item) {
		sem := make(chan struct{}, CleanParallel)
		var wg sync.WaitGroup
		for _, it := range items {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				err := rs.ByKind[it.o.Kind](ctx, req.Plan, it.m, it.o, say)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed[it.o] = err
					return
				}
				gone[it.o] = true
				fmt.Fprintf(req.Out, "removed %s\n", it.o)
			})
		}
		wg.Wait()
	}
	removeAll(first)
	removeAll(rest)
	removedHolders := map[string]bool{}
	for o := range gone {
		if slices.Contains(rs.Holders, o.Kind) {
			removedHolders[o.Name] = true
		}
	}
	for _, it := range append(first, rest...) {
		err, bad := failed[it.o]
		switch {
		case !bad:
		case it.o.On != "" && removedHolders[it.o.On]:
			gone[it.o] = true
			say(fmt.Sprintf("removed %s with VM %s (its partial results could not be collected: %v)", it.o, it.o.On, err))
		default:
			errs = append(errs, fmt.Errorf("LEFT: %s: %w", it.o, err))
		}
	}
	errs = append(errs, FinishManifests(ms, func(o Object) bool { o.Deleted = false; return gone[o] }))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(req.Out, "clean: %d manifest(s), nothing left\n", len(ms))
	return nil
}
