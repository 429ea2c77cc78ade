package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/registry"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A fleet backend added the way docs/architecture.md says, in this test binary only: one row in
// the backend table, one registry entry, and its own package's worth of code below (an opener, a
// fleet.Backend whose hosts run the host pipeline in-process on the plan fleet.Execute hands them,
// a cleaner). Neither pipeline, config nor cmd names it; `gpuvet run --backend fake` and
// `gpuvet clean` find it through the table and the registry.

const fakeFolderKind = "fake-folder"

func init() {
	backendkind.Kinds = append(backendkind.Kinds, backendkind.Kind{
		Name: "fake", Help: "fake (this test's)", Fleet: true, DiscoversGPUs: true, Section: "ssh",
		RemoteKey: "ssh.remote_backend", Flags: []backendkind.Flag{{Name: "fake-hosts", Key: "ssh.hosts"}},
	})
	registry.Register("fake", registry.Backend{
		Open: func(plan *config.Plan) (fleet.Backend, func(), error) {
			if len(plan.Config.SSH.Hosts) == 0 {
				return nil, nil, errors.New("backend fake needs --fake-hosts")
			}
			return &fakeFleet{hosts: plan.Config.SSH.Hosts}, func() {}, nil
		},
		Clean: fleet.ObjectCleaner(func() fleet.Removers {
			return fleet.Removers{ByKind: map[string]fleet.Remover{
				fakeFolderKind: func(_ context.Context, _ *config.Plan, m *fleet.Manifest, o fleet.Object, say func(string)) error {
					if !strings.Contains(o.Name, m.RunID) {
						return fmt.Errorf("folder %s is not run %s's", o.Name, m.RunID)
					}
					say("fake: removing " + o.Name)
					return os.RemoveAll(o.Name)
				},
			}}
		}),
		Flags: func(fl *pflag.FlagSet) { fl.String("fake-hosts", "", "backend fake: its hosts") },
	})
}

// fakeFleet's hosts are folders under the run's --out; a host named keep-* leaves its folder behind
// (its cleanup "fails"), as a killed run would, for `gpuvet clean`.
type fakeFleet struct{ hosts []string }

func (f *fakeFleet) Hosts(_ context.Context, r fleet.RunInfo) ([]fleet.Host, []results.SkippedHost, error) {
	var hs []fleet.Host
	for _, n := range f.hosts {
		hs = append(hs, &fakeHost{name: n, r: r, dir: filepath.Join(r.Out, "fake-"+r.ID+"-"+n)})
	}
	return hs, nil, nil
}
func (f *fakeFleet) Parallel() int                 { return len(f.hosts) }
func (f *fakeFleet) CleanupTimeout() time.Duration { return time.Minute }
func (f *fakeFleet) Finish(s *results.Summary) {
	s.Caveats = append(s.Caveats, "fake backend was here")
}
func (h *fakeHost) Name() string { return h.name }
func (h *fakeHost) object() fleet.Object {
	return fleet.Object{Kind: fakeFolderKind, Name: h.dir, Host: h.name}
}
func (h *fakeHost) Cleanup(ctx context.Context) error {
	if strings.HasPrefix(h.name, "keep-") {
		return errors.New("left on purpose")
	}
	if err := os.RemoveAll(h.dir); err != nil {
		return err
	}
	return h.r.Manifest.Deleted(h.object())
}

type fakeHost struct {
	name, dir string
	r         fleet.RunInfo
}

// Provision records the host's folder in the manifest, then makes it with the plan in it.
func (h *fakeHost) Provision(context.Context) error {
	if err := h.r.Manifest.Record(h.object()); err != nil {
		return err
	}
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(h.dir, "plan.yaml"), h.r.Plan, 0o644)
}

// Run runs the host pipeline on the plan the fleet handed over (backend sim: ssh.remote_backend).
func (h *fakeHost) Run(ctx context.Context) (*results.Summary, error) {
	plan, err := config.Load(config.Options{Files: []string{filepath.Join(h.dir, "plan.yaml")},
		Flags: []config.Flag{{Name: "--out", Path: "output.dir", Value: filepath.Join(h.dir, "out")}}})
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Run(ctx, plan, pipeline.NewDeps(plan.Config, catalog.Builtin(), io.Discard), pipeline.Options{ToolVersion: "test"})
	if err != nil {
		return nil, err
	}
	res.Summary.Hosts[0].Name = h.name
	return res.Summary, nil
}

func TestFakeBackendRunsAndCleansThroughTheTableAndRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	state := t.TempDir()
	t.Setenv("GPUVET_STATE_DIR", state)
	out := filepath.Join(t.TempDir(), "out")
	args := append([]string{"run", "--backend", "fake", "--fake-hosts", "a,keep-b", "--out", out, "--set", "sim.gpus=1"}, quickSim...)
	var so, se strings.Builder // in this process: the fake backend is this test binary's
	code := executeTo(args, &so, &se)
	stdout, stderr := so.String(), se.String()
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("exit %d, no summary: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if s.Backend != "fake" || len(s.Hosts) != 2 || s.Hosts[0].Name != "a" || s.Hosts[1].Name != "keep-b" {
		t.Fatalf("summary: backend %q, hosts %+v\n%s", s.Backend, s.Hosts, stderr)
	}
	for _, h := range s.Hosts {
		if len(h.Models) != 1 || len(h.Models[0].Endpoints) != 1 || h.Models[0].Engine.Kind != "sim" {
			t.Errorf("host %s: the host pipeline did not serve one simulated GPU: %+v", h.Name, h.Models)
		}
	}
	caveats := strings.Join(s.Caveats, "\n")
	if !strings.Contains(caveats, "fake backend was here") || !strings.Contains(caveats, "LEFTOVERS") {
		t.Fatalf("caveats lack the backend's Finish or the folder it left:\n%s", caveats)
	}
	if _, err := os.Stat(filepath.Join(out, "fake-"+s.RunID+"-a")); !os.IsNotExist(err) {
		t.Errorf("host a's folder outlived its cleanup: %v", err)
	}
	left := filepath.Join(out, "fake-"+s.RunID+"-keep-b")
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("host keep-b's folder should be left for clean: %v", err)
	}
	// gpuvet clean finds the manifest (backend fake), hands it to the registry's cleaner, and the
	// generic runner removes the folder and then the manifest.
	code, text := runCLI(t, "clean")
	if code != 0 || !strings.Contains(text, "fake: removing "+left) || !strings.Contains(text, "clean: 1 manifest(s), nothing left") {
		t.Fatalf("clean: exit %d\n%s", code, text)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("clean left %s: %v", left, err)
	}
	if ms, err := fleet.Manifests(state, "fake", ""); err != nil || len(ms) != 0 {
		t.Errorf("manifests after clean: %v, %v", ms, err)
	}
	// The table's words reach --backend's help.
	if _, text := runCLI(t, "run", "--help"); !strings.Contains(text, "fake (this test's)") {
		t.Errorf("run --help lacks the fake row:\n%s", text)
	}
}
