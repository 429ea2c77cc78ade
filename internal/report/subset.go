package report

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// HostsOnly is s narrowed to the named hosts, for a report of a few nodes of a large fleet in full
// (`gpuvet report --host NAME`): their entries, their node-to-node figures, the run's caveats about
// them, and a status rolled up from theirs. A name that is not a host of s is an error naming the
// hosts that are closest.
func HostsOnly(s *results.Summary, names []string) (*results.Summary, error) {
	by := map[string]int{}
	for i, h := range s.Hosts {
		by[h.Name] = i
	}
	out := *s
	out.Hosts = nil
	out.Flags = nil
	keep := map[string]bool{}
	for _, n := range names {
		i, ok := by[n]
		if !ok {
			return nil, fmt.Errorf("--host %s: no such host in the summary%s", n, nearHosts(s, n))
		}
		if !keep[n] {
			keep[n] = true
			out.Hosts = append(out.Hosts, s.Hosts[i])
		}
	}
	out.Status = ""
	for _, h := range out.Hosts {
		out.Status = results.Worse(out.Status, h.Status)
	}
	if out.Status == "" {
		out.Status = s.Status
	}
	// What is about another host goes (caveats "node-7: …", findings, node actions, history); what
	// is run-wide stays. Kept, every hosts/NAME.json would grow with the fleet: quadratic in all.
	other := func(host string) bool { _, isHost := by[host]; return host != "" && !keep[host] && isHost }
	aboutOther := func(c string) bool {
		host, _, ok := strings.Cut(strings.TrimPrefix(c, "node "), ": ")
		return ok && other(host)
	}
	out.Caveats = slices.DeleteFunc(slices.Clone(s.Caveats), aboutOther)
	out.Findings = slices.DeleteFunc(slices.Clone(s.Findings), func(f results.Finding) bool { return other(f.Host) })
	// The layers and the action are rolled from what stays, as the judge does: the worst status per
	// layer, and the most disruptive action of the decided hardware findings (digests lack them).
	out.Layers, out.Action = nil, ""
	for _, f := range out.Findings {
		if out.Layers == nil {
			out.Layers = map[string]results.Status{}
		}
		out.Layers[f.Layer] = results.Worse(out.Layers[f.Layer], f.Status)
		if f.Host != "" && results.HardwareLayer(f.Layer) && f.Status != results.StatusInconclusive {
			out.Action = results.MoreDisruptive(out.Action, f.Action)
		}
	}
	for _, h := range out.Hosts {
		if h.Action != "" {
			out.Action = results.MoreDisruptive(out.Action, h.Action)
		}
	}
	if hs := s.History; hs != nil {
		nh := *hs
		nh.Notes = slices.DeleteFunc(slices.Clone(hs.Notes), aboutOther)
		nh.Acceptance = slices.DeleteFunc(slices.Clone(hs.Acceptance), func(a results.Acceptance) bool { return other(a.Host) })
		nh.Drift = slices.DeleteFunc(slices.Clone(hs.Drift), func(d results.Drift) bool { return other(d.Host) })
		nh.Trend = slices.DeleteFunc(slices.Clone(hs.Trend), func(t results.TrendPoint) bool { return other(t.Host) })
		out.History = &nh
	}
	if f := s.Fleet; f != nil {
		nf := *f
		nf.Skipped = nil
		nf.NodeActions = slices.DeleteFunc(slices.Clone(f.NodeActions), func(a results.NodeAction) bool { return other(a.Node) })
		nf.Comparisons = make([]results.Compare, len(f.Comparisons))
		for i, c := range f.Comparisons {
			c.Values = slices.DeleteFunc(slices.Clone(c.Values), func(v results.CompareCell) bool { return !keep[v.Host] })
			nf.Comparisons[i] = c
		}
		out.Fleet = &nf
	}
	return &out, nil
}

// nearHosts names up to three hosts whose names share the longest prefix with name.
func nearHosts(s *results.Summary, name string) string {
	type scored struct {
		name string
		n    int
	}
	var c []scored
	for _, h := range s.Hosts {
		n := 0
		for n < len(name) && n < len(h.Name) && name[n] == h.Name[n] {
			n++
		}
		c = append(c, scored{h.Name, n})
	}
	slices.SortStableFunc(c, func(a, b scored) int { return b.n - a.n })
	var near []string
	for i := 0; i < len(c) && i < 3; i++ {
		near = append(near, c[i].name)
	}
	if len(near) == 0 {
		return " (it has no hosts)"
	}
	return fmt.Sprintf(" (%d hosts; closest: %s)", len(s.Hosts), strings.Join(near, ", "))
}

// WithDetails is s with each host that the HTML report renders in full (every host of a small fleet,
// the worst fleetDetailHosts of a large one) read from its DetailFile, relative to dir (the folder of
// s's summary.json): a large fleet's summary holds each host's digest, so that `gpuvet report` of
// its folder renders those hosts as the run's own report did, charts and all. A host whose file is
// missing or not its own stays its digest; the errors come back joined.
func WithDetails(s *results.Summary, dir string) (*results.Summary, error) {
	shown := s.Hosts
	if isFleet(s) {
		shown = shownHosts(s, fleetview.Ranked(s))
	}
	want := map[string]bool{}
	for _, h := range shown {
		want[h.Name] = h.DetailFile != ""
	}
	out := *s
	out.Hosts = slices.Clone(s.Hosts)
	var errs []error
	for i, h := range out.Hosts {
		if !want[h.Name] {
			continue
		}
		full, err := detail(h, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.Hosts[i] = full
	}
	return &out, errors.Join(errs...)
}

// detail reads host h in full from its DetailFile.
func detail(h results.Host, dir string) (results.Host, error) {
	if !filepath.IsLocal(filepath.FromSlash(h.DetailFile)) {
		return h, fmt.Errorf("%s: detail_file %q is not a path inside the summary's folder (its digest is shown)", h.Name, h.DetailFile)
	}
	one, err := results.Read(filepath.Join(dir, filepath.FromSlash(h.DetailFile)))
	if err != nil {
		return h, fmt.Errorf("%s: %w (its digest is shown)", h.Name, err)
	}
	if len(one.Hosts) != 1 || one.Hosts[0].Name != h.Name {
		return h, fmt.Errorf("%s: %s is not that host's summary (its digest is shown)", h.Name, h.DetailFile)
	}
	full := one.Hosts[0]
	full.DetailFile = h.DetailFile
	return full, nil
}
