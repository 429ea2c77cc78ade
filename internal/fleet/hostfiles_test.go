package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 31: a fleet of more than DigestHosts hosts writes each host in full as hosts/NAME.json (a
// one-host summary) and keeps each host's digest in summary.json (statuses, flags, the headline
// figures; not the samples, the other rungs, the benchmarks); its terminal output is the compact
// fleet block, with no line per host after it.
func TestExecuteLargeFleetHostFiles(t *testing.T) {
	p := testPlan(t)
	var hosts []Host
	for i := range DigestHosts + 2 {
		s := withGPUs(oneHost(healthy(), healthy()), 2)
		for ei := range s.Hosts[0].Models[0].Endpoints {
			s.Hosts[0].Models[0].Endpoints[ei].Power = &results.Power{MeanW: 500, TokensPerJoule: 2, Samples: []results.PowerSample{{T: 0, PowerW: 500}, {T: 1, PowerW: 510}}}
		}
		hosts = append(hosts, &testHost{name: fmt.Sprintf("node:%d", i), sum: s, gpus: 2})
	}
	var out, errOut bytes.Buffer
	if err := Execute(context.Background(), p, testBackend{hosts: hosts}, ExecOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	dir := p.Config.Output.Dir
	s, err := results.Read(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		e := h.Models[0].Endpoints[0]
		if e.Power == nil || e.Power.TokensPerJoule != 2 || len(e.Power.Samples) != 0 || e.Load == nil || e.Load.PeakOutputTokS != 40*256 {
			t.Fatalf("%s in summary.json: power %+v, load %v: want the figures without the samples", h.Name, e.Power, e.Load != nil)
		}
		if len(e.Load.Runs) != 1 || e.Load.Runs[0].Kind != "synchronous" || e.Load.Runs[0].TTFT.P95 == 0 || len(h.Health.GPUs[0].Bench) != 0 {
			t.Fatalf("%s in summary.json: %d rungs, %d benchmarks: want the synchronous rung alone, no benchmarks", h.Name, len(e.Load.Runs), len(h.Health.GPUs[0].Bench))
		}
		if !strings.HasPrefix(h.DetailFile, "hosts/node_") || !strings.HasSuffix(h.DetailFile, ".json") {
			t.Fatalf("%s: detail file %q", h.Name, h.DetailFile)
		}
		one, err := results.Read(filepath.Join(dir, h.DetailFile))
		if err != nil {
			t.Fatal(err)
		}
		if len(one.Hosts) != 1 || one.Hosts[0].Name != h.Name || len(one.Hosts[0].Models[0].Endpoints[0].Power.Samples) != 2 ||
			len(one.Hosts[0].Models[0].Endpoints[0].Load.Runs) != 2 || len(one.Hosts[0].Health.GPUs[0].Bench) != 1 {
			t.Fatalf("%s: %d hosts in its own file, or not in full", h.Name, len(one.Hosts))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "Fleet: 6 nodes") || strings.Contains(out.String(), "host node:") {
		t.Errorf("terminal:\n%s", out.String())
	}
}
