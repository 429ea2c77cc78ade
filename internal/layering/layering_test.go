package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gpuvet/gpuvet/"

// importGraph lists, for every package of the module, the module's packages it imports (tests
// excluded: a test may reach across to build its fixtures).
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Skipf("go list is not available here (%v): the layering is not checked", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		g[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				g[pkg] = append(g[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return g
}

// rule: packages matching from must not import packages matching any of not (prefix match on the
// path below the module, "internal/" included).
type rule struct {
	why  string
	from []string
	not  []string
}

var rules = []rule{
	{"results is the schema: it imports nothing of gpuvet's", []string{"internal/results"}, []string{"internal/", "cmd/"}},
	{"the pure functions over measured samples import only the schema",
		[]string{"internal/analysis", "internal/compare", "internal/metrics", "internal/sysfs", "internal/filelimit", "internal/term", "internal/busy"},
		[]string{"internal/load", "internal/sim", "internal/judge", "internal/health", "internal/pipeline", "internal/config", "internal/engine"}},
	{"report and judge read results (files are read by whoever wires them), never the load generator, engines or the simulator",
		[]string{"internal/report", "internal/judge"},
		[]string{"internal/load", "internal/engine", "internal/sim", "internal/dataset", "internal/modelcache", "internal/cuda", "internal/gpu", "internal/power", "internal/functional", "internal/pipeline", "internal/health", "internal/importer"}},
	{"health measures, judge decides", []string{"internal/health"}, []string{"internal/judge"}},
	{"the load generator speaks HTTP only",
		[]string{"internal/load"},
		[]string{"internal/modelcache", "internal/sim", "internal/engine", "internal/catalog", "internal/gpu", "internal/cuda", "internal/config", "internal/pipeline"}},
	{"the simulator never imports the load generator", []string{"internal/sim"}, []string{"internal/load"}},
	{"fleet backends sit above the host pipeline, never inside it",
		[]string{"internal/pipeline", "internal/health", "internal/load", "internal/judge", "internal/report", "internal/engine"},
		[]string{"internal/fleet", "internal/ssh", "internal/opennebula", "internal/k8s", "internal/hostprep", "internal/vfio"}},
	{"nothing imports the command", []string{""}, []string{"cmd/"}},
}

// violations lists every import in g that breaks a rule.
func violations(g map[string][]string) []string {
	var out []string
	for pkg, imps := range g {
		for _, r := range rules {
			if !under(pkg, r.from) {
				continue
			}
			for _, imp := range imps {
				if under(imp, r.not) {
					out = append(out, pkg+" imports "+imp+": "+r.why)
				}
			}
		}
	}
	return out
}

func TestLayering(t *testing.T) {
	g := importGraph(t)
	if len(g) < 10 {
		t.Fatalf("go list found only %d packages: %v", len(g), g)
	}
	for _, v := range violations(g) {
		t.Error(v)
	}
}

// Each rule bites: a graph that breaks it is caught.
func TestRulesCatchBreaks(t *testing.T) {
	for _, r := range rules {
		from := r.from[0]
		if from == "" {
			from = "internal/anything"
		}
		to := strings.TrimSuffix(r.not[0], "/") + "/sub"
		if v := violations(map[string][]string{from: {to}}); len(v) == 0 {
			t.Errorf("rule %q does not catch %s -> %s", r.why, from, to)
		}
	}
	if v := violations(map[string][]string{"internal/report": {"internal/results"}}); len(v) != 0 {
		t.Errorf("a legal import is caught: %v", v)
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
