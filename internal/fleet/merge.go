package fleet

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Merge folds per-host outcomes into one summary: base carries the run's identity (run id, backend,
// tool, meta); every outcome becomes one hosts[] entry named after its host (a host's summary with
// several hosts keeps them all, as HOST/NAME). A host that failed keeps what it measured, its
// status is failed and its error says in which phase; a host with no summary at all is still
// listed. Cleanup failures become caveats (they name `gpuvet clean`). The caller judges the merged
// summary (judge.Apply) after judge.CompareNodes, so the roll-up sees the node flags.
func Merge(base *results.Summary, outs []Outcome, skipped []results.SkippedHost, parallel int) *results.Summary {
	s := *base
	s.Hosts = nil
	s.Fleet = &results.Fleet{ParallelHosts: max(1, parallel), Skipped: slices.Clone(skipped)}
	for _, o := range outs {
		hosts := hostsOf(o)
		for i := range hosts {
			h := &hosts[i]
			if o.Err != nil {
				h.Error = results.JoinErr(h.Error, fmt.Sprintf("%s failed: %v", o.Phase, o.Err))
				h.Status = results.StatusFailed
				if d := results.DisruptionOf(o.Err); d != "" { // not the host's: the judge makes it inconclusive
					h.Disruption, h.Status = d, results.StatusInconclusive
				}
			}
			if why := shortfall(*h, o.ExpectGPUs); why != "" {
				h.Error = results.JoinErr(h.Error, why)
				h.Status = results.StatusFailed
			}
		}
		s.Hosts = append(s.Hosts, hosts...)
		if o.Summary != nil {
			mergeMeta(&s.Meta, o.Summary.Meta)
			for _, c := range o.Summary.Caveats {
				c = o.Host + ": " + c // a caveat is about one host's figures: say which
				if !slices.Contains(s.Caveats, c) {
					s.Caveats = append(s.Caveats, c)
				}
			}
		}
		if o.CleanErr != nil {
			s.Caveats = append(s.Caveats, fmt.Sprintf("%s: cleanup failed (%v): run `gpuvet clean` to remove what is left", o.Host, o.CleanErr))
		}
	}
	return &s
}

// hostsOf returns the hosts[] entries an outcome contributes, named after the fleet host.
func hostsOf(o Outcome) []results.Host {
	if o.Summary == nil || len(o.Summary.Hosts) == 0 {
		h := results.Host{Name: o.Host, Status: results.StatusFailed}
		if o.Summary != nil && o.Summary.Error != "" {
			h.Error = o.Summary.Error
		}
		if o.Err == nil && h.Error == "" {
			h.Error = "the host returned no results"
		}
		return []results.Host{h}
	}
	hosts := slices.Clone(o.Summary.Hosts)
	for i := range hosts {
		if len(hosts) == 1 {
			hosts[i].Name = o.Host
			if hosts[i].Parallel == nil {
				hosts[i].Parallel = o.Summary.Meta.Parallel // the host's own choice, not the fleet's
			}
		} else {
			hosts[i].Name = o.Host + "/" + hosts[i].Name
		}
		if o.Summary.Error != "" {
			hosts[i].Error = results.JoinErr(hosts[i].Error, o.Summary.Error)
			hosts[i].Status = results.StatusFailed
		}
	}
	return hosts
}

// shortfall says why a host showing fewer GPUs than it must fails ("" when it does not).
func shortfall(h results.Host, want int) string {
	if want <= 0 || h.Discovery.Error != "" || len(h.Discovery.GPUs) >= want {
		return ""
	}
	return fmt.Sprintf("the host shows %d GPU(s), %d expected (health.expect_gpus; for a VM: the GPUs passed through): GPU(s) missing were never vetted; check the passthrough (vfio-pci) and `nvidia-smi -L` there",
		len(h.Discovery.GPUs), want)
}

// mergeMeta fills the fleet's meta from a host's where the fleet's is still empty.
func mergeMeta(dst *results.Meta, src results.Meta) {
	dst.DriverVersion, dst.CUDAVersion = cmp.Or(dst.DriverVersion, src.DriverVersion), cmp.Or(dst.CUDAVersion, src.CUDAVersion)
	dst.Engine, dst.EngineVersion = cmp.Or(dst.Engine, src.Engine), cmp.Or(dst.EngineVersion, src.EngineVersion)
	if dst.LoadProfile == nil {
		dst.LoadProfile = src.LoadProfile
	}
	if len(dst.Models) == 0 {
		dst.Models = src.Models
	}
	// The plan's count, or with auto the most that any host loaded at once (each host chose its own).
	dst.ParallelGPUs = max(dst.ParallelGPUs, src.ParallelGPUs)
	for k, v := range src.Thresholds {
		if dst.Thresholds == nil {
			dst.Thresholds = map[string]results.Threshold{}
		}
		if _, ok := dst.Thresholds[k]; !ok {
			dst.Thresholds[k] = v
		}
	}
}
