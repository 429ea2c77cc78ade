package layering

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/gpuvet/gpuvet/"

// graph maps a package of the module (its path below the module) to the module's packages it
// imports directly.
type graph map[string][]string

// importGraph lists, for every package of the module, the module's packages it imports (tests
// excluded: a test may reach across to build its fixtures; third_party is vendored code, not ours).
func importGraph(t *testing.T) graph {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Skipf("go list is not available here (%v): the layering is not checked", err)
	}
	statSources(t)
	g := graph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		if strings.HasPrefix(pkg, "third_party/") {
			continue
		}
		g[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) && !strings.HasPrefix(imp, module+"third_party/") {
				g[pkg] = append(g[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return g
}

// statSources stats every Go file of the module, so go test's cache, which sees files a test
// opens but not what `go list` reads, reruns this test when an import changes.
func statSources(t *testing.T) {
	t.Helper()
	filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
			os.Stat(p)
		}
		return nil
	})
}

// allowed is the allow-list: every package of the module and the module packages it may import.
// A new package, or a new import, must be added here first; the rules below are then checked over
// everything the allow-list lets a package reach, directly or through others.
var allowed = graph{
	// The schema and the leaves: nothing of gpuvet's, or only the schema and file bounds.
	"internal/results":     nil,
	"internal/filelimit":   nil,
	"internal/sysfs":       nil,
	"internal/netstamp":    nil,
	"internal/testwait":    nil, // a test-only helper: tests import it, no package does
	"internal/layering":    nil,
	"internal/enginekind":  nil,
	"internal/backendkind": nil,
	"internal/inpod":       nil,                                                            // the in-pod protocol: a Job's result in its log, the probe's answer
	"internal/term":        {"internal/compare", "internal/fleetview", "internal/results"}, // the terminal renderer: results in, text out
	"internal/analysis":    {"internal/results"},
	"internal/busy":        {"internal/results"},
	"internal/cpuwait":     {},
	"internal/compare":     {"internal/metrics", "internal/results"},
	"internal/metrics":     {"internal/results"},
	"internal/power":       {"internal/gpu", "internal/metrics", "internal/results"},
	"internal/functional":  {"internal/results"},
	"internal/catalog":     {"internal/filelimit"},
	"internal/dataset":     {"internal/filelimit"},
	"internal/roofline":    {"internal/catalog"},
	"internal/config":      {"internal/backendkind", "internal/enginekind", "internal/filelimit", "internal/results"},
	"internal/dcgm":        {"internal/filelimit", "internal/results"},
	"internal/importer":    {"internal/analysis", "internal/filelimit", "internal/results"},
	"internal/modelcache":  {"internal/config", "internal/enginekind", "internal/filelimit", "internal/results"},
	"internal/cuda":        {"internal/results", "internal/sysfs"},
	"internal/gpu":         {"internal/catalog", "internal/filelimit", "internal/results", "internal/sysfs"},
	"internal/engine":      {"internal/enginekind", "internal/filelimit", "internal/results", "internal/sysfs"},
	// A fleet's nodes ranked worst first, for report and term; synthetic fleets for their tests and bench.
	"internal/fleetview":       {"internal/results"},
	"internal/fleetview/synth": {"internal/results"},
	// The outputs and the decisions: results in, text and verdicts out.
	"internal/report": {"internal/fleetview", "internal/results"},
	"internal/judge":  {"internal/compare", "internal/config", "internal/results"},
	// The run history: a database of results; the judge's key figures, compared by the judge.
	"internal/history": {"internal/compare", "internal/config", "internal/judge", "internal/results"},
	// The two stores, fresh, for tests (SQLite, and the PostgreSQL server CI starts).
	"internal/history/historytest": {"internal/config"},
	// The measuring phases.
	"internal/sim":    {"internal/catalog", "internal/gpu", "internal/netstamp", "internal/results", "internal/roofline"},
	"internal/load":   {"internal/analysis", "internal/dataset", "internal/enginekind", "internal/metrics", "internal/netstamp", "internal/results"},
	"internal/health": {"internal/busy", "internal/catalog", "internal/compare", "internal/config", "internal/dcgm", "internal/gpu", "internal/results", "internal/sysfs"},
	// The host pipeline wires the phases.
	"internal/pipeline": {"internal/backendkind", "internal/busy", "internal/catalog", "internal/cpuwait", "internal/config", "internal/cuda", "internal/engine", "internal/enginekind", "internal/functional",
		"internal/gpu", "internal/health", "internal/history", "internal/importer", "internal/judge", "internal/load", "internal/modelcache", "internal/power",
		"internal/report", "internal/results", "internal/roofline", "internal/sim", "internal/sysfs", "internal/term"},
	// The fleet layer and its backends, above the host pipeline.
	"internal/fleet":      {"internal/compare", "internal/config", "internal/filelimit", "internal/history", "internal/judge", "internal/pipeline", "internal/report", "internal/results", "internal/term"},
	"internal/ssh":        {"internal/config", "internal/filelimit", "internal/fleet", "internal/hostprep", "internal/results", "internal/vfio"},
	"internal/opennebula": {"internal/config", "internal/filelimit", "internal/fleet", "internal/hostprep", "internal/judge", "internal/results", "internal/ssh"},
	// Host preparation (packages, the vfio release) that the ssh and opennebula backends drive.
	"internal/hostprep": {"internal/config", "internal/fleet", "internal/results"},
	"internal/vfio":     {"internal/fleet"},
	"internal/slurm":    {"internal/backendkind", "internal/config", "internal/filelimit", "internal/fleet", "internal/results"},
	"internal/k8s":      {"internal/config", "internal/inpod", "internal/engine", "internal/enginekind", "internal/fleet", "internal/modelcache", "internal/pipeline", "internal/results"},
	// The stand-in for a thousand kwok nodes' kubelets (bench/k8sscale and the scale test play with it).
	"internal/k8s/kwokplayer": {"internal/k8s", "internal/results"},
	// Test servers the backends' tests start (no gpuvet code).
	"internal/ssh/sshtest":           nil,
	"internal/ssh/sshdtest":          nil,
	"internal/opennebula/onetest":    nil,
	"internal/hostprep/hostpreptest": {"internal/ssh/sshdtest"},
	"internal/vfio/vfiotest":         nil,
	// The command, and the benchmark and script programs beside it.
	// The registry names the fleet backends' packages, for the command only.
	"internal/registry": {"internal/config", "internal/fleet", "internal/k8s", "internal/opennebula", "internal/slurm", "internal/ssh"},
	"cmd/gpuvet": {"internal/analysis", "internal/backendkind", "internal/catalog", "internal/config", "internal/cuda", "internal/dataset", "internal/engine", "internal/enginekind",
		"internal/fleet", "internal/gpu", "internal/health", "internal/history", "internal/importer", "internal/inpod", "internal/judge", "internal/load",
		"internal/modelcache", "internal/pipeline", "internal/registry", "internal/report", "internal/results", "internal/sim",
		"internal/term"},
	"bench/client":                {"internal/load", "internal/metrics", "internal/results", "internal/sim"},
	"bench/microbench":            {"internal/cuda", "internal/results"},
	"bench/nodescale":             {"internal/config", "internal/fleetview", "internal/pipeline", "internal/results"},
	"bench/detection":             {"internal/results"},
	"bench/repeat":                {"internal/results"},
	"bench/reportscale":           {"internal/config", "internal/fleet", "internal/fleetview", "internal/fleetview/synth", "internal/judge", "internal/report", "internal/results", "internal/term"},
	"bench/readfloor":             {"internal/netstamp"},
	"bench/simspeed":              {"internal/sim"},
	"bench/k8sscale":              {"internal/k8s", "internal/k8s/kwokplayer", "internal/results"},
	"scripts/k8s-real-node/pause": nil,
}

// rule: no package matching from, but those matching but, may reach (directly or through others) a
// package matching any of not (prefix match on the path below the module, "internal/" included).
type rule struct {
	why  string
	from []string
	not  []string
	but  []string
}

var backends = []string{"internal/ssh", "internal/opennebula", "internal/k8s", "internal/slurm"}

var rules = []rule{
	{"results is the schema: it reaches nothing of gpuvet's", []string{"internal/results"}, []string{"internal/", "cmd/", "bench/"}, nil},
	{"the pure functions over measured samples reach only the schema",
		[]string{"internal/analysis", "internal/compare", "internal/metrics", "internal/sysfs", "internal/filelimit", "internal/term", "internal/busy"},
		[]string{"internal/load", "internal/sim", "internal/judge", "internal/health", "internal/pipeline", "internal/config", "internal/engine", "internal/catalog", "internal/gpu", "internal/cuda"}, nil},
	{"report and judge read results (files are read by whoever wires them), never the load generator, engines or the simulator",
		[]string{"internal/report", "internal/judge"},
		[]string{"internal/load", "internal/engine", "internal/sim", "internal/dataset", "internal/modelcache", "internal/cuda", "internal/gpu", "internal/power", "internal/functional", "internal/pipeline", "internal/health", "internal/importer", "internal/dcgm", "internal/catalog", "internal/roofline"}, nil},
	{"health measures, judge decides", []string{"internal/health"}, []string{"internal/judge"}, nil},
	{"report renders the verdicts results carry, never the judge's rules that made them", []string{"internal/report"}, []string{"internal/judge"}, nil},
	{"judge and health decide and measure: they never write to the terminal (whoever wires them renders)",
		[]string{"internal/judge", "internal/health"}, []string{"internal/term"}, nil},
	{"report and judge never open the history's database: what it knew is in results",
		[]string{"internal/report", "internal/judge"}, []string{"internal/history"}, nil},
	{"the history stores results: it measures nothing and knows no backend",
		[]string{"internal/history"},
		[]string{"internal/load", "internal/sim", "internal/engine", "internal/health", "internal/pipeline", "internal/fleet", "internal/ssh", "internal/opennebula", "internal/k8s"}, nil},
	{"the load generator speaks HTTP only",
		[]string{"internal/load"},
		[]string{"internal/modelcache", "internal/sim", "internal/engine", "internal/catalog", "internal/gpu", "internal/cuda", "internal/config", "internal/pipeline", "internal/roofline"}, nil},
	{"the simulator never reaches the load generator", []string{"internal/sim"}, []string{"internal/load"}, nil},
	{"the load generator never reaches the simulator", []string{"internal/load"}, []string{"internal/sim"}, nil},
	{"fleet backends sit above the host pipeline, never inside it",
		[]string{"internal/pipeline", "internal/health", "internal/load", "internal/judge", "internal/report", "internal/engine", "internal/sim", "internal/config", "internal/results"},
		[]string{"internal/fleet", "internal/ssh", "internal/opennebula", "internal/k8s", "internal/slurm", "internal/hostprep", "internal/vfio"}, nil},
	{"the fleet layer knows no backend: backends register with it", []string{"internal/fleet"}, backends, nil},
	{"kubernetes reaches no other backend", []string{"internal/k8s"}, []string{"internal/ssh", "internal/opennebula", "internal/slurm"}, nil},
	{"slurm reaches no other backend", []string{"internal/slurm"}, []string{"internal/ssh", "internal/opennebula", "internal/k8s"}, nil},
	// opennebula vets each VM over ssh (docs/fleet.md), so it may reach ssh; ssh never reaches it.
	{"ssh reaches no other backend", []string{"internal/ssh"}, []string{"internal/opennebula", "internal/k8s"}, nil},
	{"opennebula reaches no other backend than the ssh it vets VMs with", []string{"internal/opennebula"}, []string{"internal/k8s"}, nil},
	{"the engine kinds table is data every layer reads: it reaches nothing", []string{"internal/enginekind"}, []string{"internal/", "cmd/"}, nil},
	{"the in-pod protocol is spoken by the command and the Kubernetes backend: it reaches nothing", []string{"internal/inpod"}, []string{"internal/", "cmd/"}, nil},
	{"the backend kinds table is data every layer reads: it reaches nothing", []string{"internal/backendkind"}, []string{"internal/", "cmd/"}, nil},
	{"nothing imports the command", []string{""}, []string{"cmd/"}, nil},
	{"only the command reaches the backend registry: every other layer reads the backend table", []string{""}, []string{"internal/registry"}, []string{"cmd/"}},
}

// reach is every package p reaches in g, p excluded.
func (g graph) reach(p string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, q := range g[p] {
			if !seen[q] {
				seen[q] = true
				walk(q)
			}
		}
	}
	walk(p)
	out := make([]string, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// violations lists, for the real graph g, every package missing from the allow-list, every import
// the allow-list does not grant, and every rule broken by what a package reaches, through the
// allow-list (what it may reach) or the real graph (what it does).
func violations(g, allow graph) []string {
	var out []string
	for _, pkg := range sortedKeys(g) {
		grant, ok := allow[pkg]
		if !ok {
			out = append(out, pkg+": not in the allow-list (internal/layering): say what it may import")
			continue
		}
		for _, imp := range g[pkg] {
			if !slices.Contains(grant, imp) {
				out = append(out, pkg+" imports "+imp+": not in its allow-list entry (internal/layering)")
			}
		}
	}
	for _, gr := range []struct {
		name string
		g    graph
	}{{"may reach", allow}, {"reaches", g}} {
		for _, pkg := range sortedKeys(gr.g) {
			for _, r := range rules {
				if !under(pkg, r.from) || under(pkg, r.but) {
					continue
				}
				for _, q := range gr.g.reach(pkg) {
					if under(q, r.not) && !(r.from[0] == "" && q == pkg) {
						out = append(out, pkg+" "+gr.name+" "+q+": "+r.why)
					}
				}
			}
		}
	}
	return dedupe(out)
}

func TestLayering(t *testing.T) {
	g := importGraph(t)
	if len(g) < 10 {
		t.Fatalf("go list found only %d packages: %v", len(g), g)
	}
	for _, v := range violations(g, allowed) {
		t.Error(v)
	}
	for pkg := range allowed {
		if _, ok := g[pkg]; !ok {
			t.Errorf("%s is in the allow-list but not in the module: remove its entry", pkg)
		}
	}
}

// The real graph passes, and a planted break of each kind is caught: a package the allow-list
// does not name, an import it does not grant, and every rule broken through a package in between.
func TestPlantedBreaksAreCaught(t *testing.T) {
	if v := violations(allowed, allowed); len(v) != 0 {
		t.Fatalf("the allow-list breaks its own rules: %v", v)
	}
	plant := func(edits map[string][]string) (graph, graph) {
		g, allow := graph{}, graph{}
		for k, v := range allowed {
			g[k], allow[k] = slices.Clone(v), slices.Clone(v)
		}
		for k, v := range edits {
			g[k] = append(g[k], v...)
			allow[k] = append(allow[k], v...)
		}
		return g, allow
	}
	// A new package with no entry.
	g, _ := plant(nil)
	g["internal/newthing"] = []string{"internal/results"}
	if v := violations(g, allowed); len(v) != 1 || !strings.Contains(v[0], "internal/newthing: not in the allow-list") {
		t.Errorf("a package without an entry: %v", v)
	}
	// An import the entry does not grant.
	g, _ = plant(nil)
	g["internal/report"] = append(g["internal/report"], "internal/compare")
	if v := violations(g, allowed); len(v) != 1 || !strings.Contains(v[0], "not in its allow-list entry") {
		t.Errorf("an ungranted import: %v", v)
	}
	// Each rule, broken through an intermediate package that is itself allowed everything: the
	// closure, not the direct import, is what is checked — in the allow-list and in the graph.
	for _, r := range rules {
		from := r.from[0]
		if from == "" {
			from = "internal/anything"
		}
		to := r.not[0]
		if strings.HasSuffix(to, "/") {
			to += "sub"
		}
		g, allow := plant(map[string][]string{from: {"internal/between"}, "internal/between": {to}})
		v := violations(g, allow)
		if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, from+" may reach "+to+": "+r.why) }) ||
			!slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, from+" reaches "+to+": "+r.why) }) {
			t.Errorf("rule %q does not catch %s -> internal/between -> %s: %v", r.why, from, to, v)
		}
	}
	// The named backend rules, planted directly.
	for _, b := range [][2]string{{"internal/ssh", "internal/k8s"}, {"internal/k8s", "internal/opennebula"}, {"internal/ssh", "internal/opennebula"},
		{"internal/opennebula", "internal/k8s"}, {"internal/k8s", "internal/ssh"}, {"internal/fleet", "internal/ssh"}, {"internal/load", "internal/sim"},
		{"internal/sim", "internal/load"}, {"internal/results", "internal/filelimit"}, {"internal/judge", "internal/load"}, {"internal/report", "internal/health"},
		{"internal/load", "internal/engine"}, {"internal/pipeline", "cmd/gpuvet"}} {
		g, allow := plant(map[string][]string{b[0]: {b[1]}})
		if v := violations(g, allow); len(v) == 0 {
			t.Errorf("%s -> %s is not caught", b[0], b[1])
		}
	}
}

// under reports whether pkg is one of the given packages or below one ("" is every package; a
// trailing "/" means anything below).
func under(pkg string, roots []string) bool {
	for _, r := range roots {
		if r == "" || pkg == r || strings.HasPrefix(pkg, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

func sortedKeys(g graph) []string {
	var ks []string
	for k := range g {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
