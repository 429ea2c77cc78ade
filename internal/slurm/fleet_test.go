package slurm

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
)

const fourNodes = `NodeName=g1 Gres=gpu:h100:8(S:0-1) State=IDLE Partitions=gpu,all
NodeName=g2 Gres=gpu:8 State=MIXED Partitions=gpu
NodeName=g3 Gres=gpu:8 State=IDLE+DRAIN Partitions=gpu Reason=ops: fan [ops@2026-12-01T00:00:00]
NodeName=g4 Gres=gpu:8 State=DOWN* Partitions=gpu Reason=Not responding [slurm@2026-12-01T00:00:00]
NodeName=c1 Gres=(null) State=IDLE Partitions=cpu,all
`

func hostsFleet(t *testing.T, c config.Slurm, extra map[string]string) (*Fleet, *scriptedSlurm) {
	t.Helper()
	answers := map[string]string{
		"scontrol show config":           "ClusterName = c1\n",
		"scontrol -o show node":          fourNodes,
		"scontrol show hostnames g[1-2]": "g1\ng2\n",
		"scontrol show hostnames g[1-9]": "g1\ng2\ng9\n",
	}
	for k, v := range extra {
		answers[k] = v
	}
	s := &scriptedSlurm{answers: answers}
	p, _ := config.Load(config.Options{})
	return &Fleet{Config: c, Plan: p, Slurm: s, StateDir: t.TempDir(), Out: t.TempDir()}, s
}

func names(hs []fleet.Host) []string {
	var n []string
	for _, h := range hs {
		n = append(n, h.Name())
	}
	return n
}

func runInfo(t *testing.T) fleet.RunInfo {
	m, err := fleet.NewManifest(t.TempDir(), "slurm", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return fleet.RunInfo{ID: "r1", Out: t.TempDir(), Manifest: m}
}

// Every GPU node is chosen but those that cannot run a job, each skipped with its reason:
// another's drain (named, left alone), down; a node without gres gpu.
func TestHostsSelection(t *testing.T) {
	f, _ := hostsFleet(t, defaults(), nil)
	hs, skipped, err := f.Hosts(context.Background(), runInfo(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(hs); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Fatalf("hosts %v", got)
	}
	why := map[string]string{}
	for _, s := range skipped {
		why[s.Name] = s.Reason
	}
	if !strings.Contains(why["g3"], `drained by ops ("ops: fan"): not gpuvet's drain, left alone`) || why["c1"] != "no gres gpu" || !strings.Contains(why["g4"], "DOWN") {
		t.Fatalf("skipped %v", why)
	}
	if hs[0].(fleet.GPUCounter).ExpectGPUs() != 8 {
		t.Error("g1 must show its 8 gres GPUs")
	}
}

func TestHostsFilters(t *testing.T) {
	c := defaults()
	c.Nodes, c.Partition = []string{"g[1-2]"}, "all"
	f, _ := hostsFleet(t, c, nil)
	hs, _, err := f.Hosts(context.Background(), runInfo(t))
	if err != nil || !slices.Equal(names(hs), []string{"g1"}) {
		t.Fatalf("nodes g[1-2] in partition all: %v %v", names(hs), err)
	}
	c = defaults()
	c.Reservation = "burnin"
	f, _ = hostsFleet(t, c, map[string]string{"scontrol -o show reservation burnin": "ReservationName=burnin StartTime=now Nodes=g[1-2] NodeCnt=2 Flags=MAINT"})
	hs, _, err = f.Hosts(context.Background(), runInfo(t))
	if err != nil || !slices.Equal(names(hs), []string{"g1", "g2"}) {
		t.Fatalf("reservation burnin: %v %v", names(hs), err)
	}
	// A node the cluster does not have is bad input, before anything is submitted.
	c = defaults()
	c.Nodes = []string{"g[1-9]"}
	f, s := hostsFleet(t, c, nil)
	if _, _, err := f.Hosts(context.Background(), runInfo(t)); err == nil || !strings.Contains(err.Error(), "node g9 is not in the cluster") {
		t.Fatalf("unknown node: %v", err)
	}
	if s.ran("sbatch") {
		t.Fatal("submitted on bad input")
	}
	// Nothing to vet is an error naming why.
	c = defaults()
	c.Partition = "cpu"
	f, _ = hostsFleet(t, c, nil)
	if _, _, err := f.Hosts(context.Background(), runInfo(t)); err == nil || !strings.Contains(err.Error(), "no node to vet") {
		t.Fatalf("cpu partition: %v", err)
	}
}

// The job: held, exclusive, the node's gres, recorded before it is released; the script runs
// the node's share of node_set.
func TestProvisionRecordsHeldJobBeforeRelease(t *testing.T) {
	c := defaults()
	c.NodeSet = map[string][]string{"g1": {"sim.straggler=3"}}
	f, s := hostsFleet(t, c, map[string]string{"sbatch": "41\n", "scontrol release 41": ""})
	r := runInfo(t)
	hs, _, err := f.Hosts(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	h := hs[0].(*Host)
	recordedAtRelease := false
	f.Slurm = runnerFunc(func(ctx context.Context, name string, args ...string) (string, error) {
		if name == "scontrol" && len(args) > 0 && args[0] == "release" {
			recordedAtRelease = slices.ContainsFunc(r.Manifest.Live(), func(o fleet.Object) bool { return o.Kind == KindJob && o.Name == args[1] })
		}
		return s.Run(ctx, name, args...)
	})
	if err := h.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !recordedAtRelease {
		t.Error("the job was released before its id was in the manifest")
	}
	var sb string
	for _, c := range s.calls {
		if strings.HasPrefix(c, "sbatch ") {
			sb = c
		}
	}
	for _, want := range []string{"--hold", "--exclusive", "--nodelist=g1", "--gres=gpu:8", "--time=120", "--job-name=gpuvet-r1-g1", "--no-requeue"} {
		if !strings.Contains(sb, want) {
			t.Errorf("sbatch lacks %s: %s", want, sb)
		}
	}
	if i, j := slices.IndexFunc(s.calls, func(c string) bool { return strings.HasPrefix(c, "sbatch") }), slices.Index(s.calls, "scontrol release 41"); i < 0 || j < i {
		t.Fatalf("calls %q", s.calls)
	}
	live := r.Manifest.Live()
	if len(live) != 1 || live[0].Kind != KindJob || live[0].Name != "41" || live[0].Host != "g1" {
		t.Fatalf("manifest %+v", live)
	}
	if !strings.Contains(h.script(), "--set 'sim.straggler=3'") || !strings.Contains(h.script(), filepath.Join(h.dir, "plan.yaml")) {
		t.Errorf("script:\n%s", h.script())
	}
}

type runnerFunc func(ctx context.Context, name string, args ...string) (string, error)

func (f runnerFunc) Run(ctx context.Context, name string, args ...string) (string, error) {
	return f(ctx, name, args...)
}
