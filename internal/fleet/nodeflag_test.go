package fleet

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleetview/synth"
	"github.com/gpuvet/gpuvet/internal/report"
)

// Issue 31: a node-to-node flag names its node once wherever it is printed: the report's flags
// ("gpu-node-0007 compare.node_to_node — Qwen/Qwen3-8B: sustained_req_s 26.2 is 15.0 % below …",
// not "gpu-node-0007: node gpu-node-0007 … on node gpu-node-0007"), the terminal's fleet block and
// its small-fleet flag lines, and JUnit's failure (whose class is the host).
func TestNodeFlagNamesItsNodeOnce(t *testing.T) {
	for _, n := range []int{4, 12} {
		s, _ := judgedFleet(t, n, func(o *synth.Options) { o.Straggler, o.Slowdown, o.Failed, o.NeverReady = 2, 0.3, -1, -1 })
		name := synth.NodeName(2)
		once := func(where, line string) {
			if c := strings.Count(line, name); c != 1 {
				t.Errorf("%d nodes, %s names %s %d times: %s", n, where, name, c, line)
			}
		}
		var term bytes.Buffer
		Render(&term, s)
		lines := 0
		for _, l := range strings.Split(term.String(), "\n") {
			if strings.Contains(l, "median of the other nodes") && !strings.Contains(l, "flag compare.node_to_node:") { // a host's own line names it above
				once("the terminal", l)
				lines++
			}
		}
		var html bytes.Buffer
		if err := report.RenderHTML(s, &html); err != nil {
			t.Fatal(err)
		}
		for _, li := range strings.Split(html.String(), "<li>") {
			if strings.Contains(li, "<code>compare.node_to_node</code>") {
				once("report.html's flag", li[:strings.Index(li, "</li>")])
				lines++
			}
		}
		junit := filepath.Join(t.TempDir(), "junit.xml")
		if err := report.WriteJUnit(s, junit); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(junit)
		for _, m := range regexp.MustCompile(`<testcase name="compare.node_to_node" classname="([^"]*)">\s*<failure message="([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
			once("a JUnit case's class and failure", m[1]+" "+m[2])
			lines++
		}
		if lines < 3 {
			t.Errorf("%d nodes: %d node-to-node flag lines printed, want them in the terminal, the report and JUnit", n, lines)
		}
	}
}
