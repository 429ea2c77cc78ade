package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// JUnit XML for CI systems: one test case per check, in suites per host's health, per model on each
// host, and for the run. A fired flag is a <failure>, broken work an <error>, what could not decide
// or was disabled <skipped> with why; a flag no case accounts for becomes a case of its own.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Hostname  string      `xml:"hostname,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitSkip    `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`

	// What CTRF adds to the same case: the subject after its name ("Qwen/Qwen3-8B gpu 0"), its
	// labels, and whether a skip ran and could not decide (CTRF "other") rather than did not run.
	Subject      string         `xml:"-"`
	Extra        map[string]any `xml:"-"`
	Inconclusive bool           `xml:"-"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

type junitSkip struct {
	Message string `xml:"message,attr"`
}

// flagPool hands out the flags of one subject to the cases that explain them; what is left over
// becomes cases of its own. seen spans the whole run, since phases copy flags up to host and run.
type flagPool struct {
	flags []results.Flag
	used  []bool
	seen  map[results.Flag]bool
}

func newPool(seen map[results.Flag]bool, fs ...[]results.Flag) *flagPool {
	p := &flagPool{seen: seen}
	for _, list := range fs {
		for _, f := range list {
			if !seen[f] {
				seen[f] = true
				p.flags = append(p.flags, f)
			}
		}
	}
	p.used = make([]bool, len(p.flags))
	return p
}

// take returns the reasons of the flags whose check contains any of keys, and marks them used.
func (p *flagPool) take(keys ...string) []results.Flag {
	var out []results.Flag
	for i, f := range p.flags {
		if p.used[i] {
			continue
		}
		for _, k := range keys {
			if strings.Contains(f.Check, k) {
				p.used[i] = true
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// rest are the flags no case took, each a failed case of its own.
func (p *flagPool) rest(class string) []junitCase {
	var out []junitCase
	for i, f := range p.flags {
		if !p.used[i] {
			out = append(out, failCase(class, f.Check, []results.Flag{f}))
		}
	}
	return out
}

func failCase(class, name string, fs []results.Flag) junitCase {
	c := junitCase{Classname: class, Name: name}
	if len(fs) > 0 {
		var msgs []string
		for _, f := range fs {
			msgs = append(msgs, f.Reason)
		}
		msg := strings.Join(msgs, "; ")
		if tag := flagTag(fs[0]); tag != "" {
			msg = tag + " " + msg
		}
		c.Failure = &junitProblem{Message: msg, Type: fs[0].Check, Text: strings.Join(msgs, "\n")}
		if fs[0].Layer != "" {
			c.Extra = map[string]any{"layer": fs[0].Layer}
			if fs[0].Action != "" {
				c.Extra["action"] = fs[0].Action
			}
		}
	}
	return c
}

// flagTag is the layer and the action of a flag judged by layer, as a failure message starts:
// "[engine · fix the engine or its configuration]" ("" for a flag without a layer).
func flagTag(f results.Flag) string {
	if f.Layer == "" {
		return ""
	}
	if w := results.ActionWords[f.Action]; w != "" {
		return "[" + f.Layer + " · " + w + "]"
	}
	return "[" + f.Layer + "]"
}

func classPart(s string) string {
	return strings.NewReplacer(" ", "_", "/", "_", ".", "_").Replace(s)
}

// JUnit builds the JUnit document of s.
func JUnit(s *results.Summary) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("junit: no summary")
	}
	doc := junitDoc(s)
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// junitDoc is the run's tests, once: junit.xml writes them and ctrf.json renders the same list, so
// both files count the same tests with the same outcomes.
func junitDoc(s *results.Summary) junitSuites {
	union := map[results.Flag]bool{} // flags a host suite already holds
	doc := junitSuites{Name: "gpuvet " + s.RunID}
	for _, h := range s.Hosts {
		seen := map[results.Flag]bool{} // per host: two hosts may raise the same flag on their "gpu 3"
		var hs []junitSuite
		if h.Health != nil {
			hs = append(hs, healthSuite(h, seen))
		}
		for _, m := range h.Models {
			hs = append(hs, modelSuite(h, m, seen))
		}
		for _, su := range append(hs, nonEmpty(verdictSuite(h), hostSuite(h, seen))...) {
			su.Hostname = h.Name
			doc.Suites = append(doc.Suites, su)
		}
		maps.Copy(union, seen)
	}
	doc.Suites = append(doc.Suites, nonEmpty(fleetSuite(s), findingSuite(s))...)
	doc.Suites = append(doc.Suites, runSuite(s, union))
	for i := range doc.Suites {
		su := &doc.Suites[i]
		if !s.StartedAt.IsZero() {
			su.Timestamp = s.StartedAt.UTC().Format("2006-01-02T15:04:05")
		}
		for _, c := range su.Cases {
			su.Tests++
			switch {
			case c.Failure != nil:
				su.Failures++
			case c.Error != nil:
				su.Errors++
			case c.Skipped != nil:
				su.Skipped++
			}
		}
		doc.Tests += su.Tests
		doc.Failures += su.Failures
		doc.Errors += su.Errors
		doc.Skipped += su.Skipped
	}
	return doc
}

// nonEmpty are the suites that hold a case.
func nonEmpty(sus ...junitSuite) []junitSuite {
	return slices.DeleteFunc(sus, func(su junitSuite) bool { return len(su.Cases) == 0 })
}

// verdictSuite holds the judged verdict of each GPU and of the host (results.Host.GPUs): the
// statuses the terminal and the report show, as tests a CI reads.
func verdictSuite(h results.Host) junitSuite {
	su := junitSuite{Name: "gpuvet.verdict." + h.Name}
	class := "gpuvet.verdict." + classPart(h.Name)
	for _, g := range h.GPUs {
		why := strings.Join(append(append([]string(nil), g.Checks...), g.Why...), "; ")
		msg := fmt.Sprintf("gpu %d: %s (health %s, serving %s)", g.Index, g.Status, orDash(string(g.Health)), orDash(string(g.Serving)))
		su.Cases = append(su.Cases, verdictCase(class, fmt.Sprintf("gpu %d", g.Index), "", g.Status, msg, why, nil, g.Action,
			map[string]any{"node": h.Name, "gpu": g.Index, "gpu_name": g.Name}))
	}
	if len(su.Cases) > 0 {
		su.Cases = append(su.Cases, verdictCase(class, "host", h.Name, h.Status, "host "+h.Name+": "+string(h.Status), firstLine(h.Error),
			h.Layers, h.Action, map[string]any{"node": h.Name}))
	}
	return su
}

// verdictCase is a judged status as a test: ok passes; flag and failed fail; inconclusive is a skip
// that ran and could not decide; a run that stopped before it is an error. Its message is msg, the
// layers, the action in words, then detail; its labels extra, with the status, action and layers.
func verdictCase(class, name, subject string, st results.Status, msg, detail string, layers map[string]results.Status, action string, extra map[string]any) junitCase {
	if l := results.LayerLine(layers); l != "" {
		msg += " (" + l + ")"
	}
	if w := results.ActionWords[action]; w != "" && action != results.ActionNone {
		msg += " · " + w
	}
	if detail != "" {
		msg += ": " + detail
	}
	c := junitCase{Classname: class, Name: name, Subject: subject, Extra: extra}
	extra["status"] = string(st)
	if action != "" {
		extra["action"] = action
	}
	if len(layers) > 0 {
		extra["layers"] = layerMap(layers)
	}
	switch st {
	case results.StatusOK:
	case results.StatusFlag, results.StatusFailed:
		c.Failure = &junitProblem{Message: msg, Type: "verdict." + string(st), Text: msg}
	case results.StatusInconclusive:
		c.Skipped, c.Inconclusive = &junitSkip{Message: "inconclusive: " + msg}, true
	case results.StatusInterrupted, results.StatusIncomplete, results.StatusNotRun:
		c.Error = &junitProblem{Message: msg, Type: string(st)}
	default:
		c.Skipped = &junitSkip{Message: msg}
	}
	return c
}

// WriteJUnit writes the JUnit XML of s to path.
func WriteJUnit(s *results.Summary, path string) error { return writeFile(JUnit, s, path) }

// healthChecks are the per-GPU health checks and the flag-check fragments each one answers for.
var healthChecks = []struct {
	name string
	keys []string
}{
	{"health.ecc", []string{"ecc", "remapped", "retired"}},
	{"health.pcie_width", []string{"pcie_width", "pcie_link", "pcie_gen"}},
	{"health.clock_events", []string{"clock", "throttle", "thermal", "power_brake"}},
	{"health.xid", []string{"xid"}},
}

func healthSuite(h results.Host, seen map[results.Flag]bool) junitSuite {
	su := junitSuite{Name: "gpuvet.health." + h.Name}
	hh := h.Health
	for _, g := range hh.GPUs {
		class := "gpuvet.health." + classPart(h.Name) + ".gpu" + fmt.Sprint(g.GPU.Index)
		pool := newPool(seen, g.Flags)
		first := len(su.Cases)
		for _, hc := range healthChecks {
			su.Cases = append(su.Cases, failCase(class, hc.name, pool.take(hc.keys...)))
		}
		for _, b := range g.Bench {
			keys := []string{"bench." + b.Name, b.Name}
			if strings.HasPrefix(b.Name, "pcie") {
				keys = append(keys, "pcie_bandwidth", "pcie_bw") // the health phase's PCIe < min GB/s check
			}
			c := failCase(class, "bench."+b.Name, pool.take(keys...))
			if b.Error != "" || b.Status == results.StatusFailed {
				c.Error = &junitProblem{Message: orDash(b.Error), Type: "bench." + b.Name}
			} else if c.Failure == nil && b.Ratio != nil {
				c.SystemOut = fmt.Sprintf("%s %s = %.0f %% of the datasheet peak", num(b.Value), b.Unit, *b.Ratio*100)
			}
			su.Cases = append(su.Cases, c)
		}
		if g.Burn != nil {
			c := failCase(class, "health.burn", pool.take("burn"))
			if g.Burn.Error != "" {
				c.Error = &junitProblem{Message: g.Burn.Error, Type: "health.burn"}
			}
			su.Cases = append(su.Cases, c)
		}
		if hh.DCGM != nil {
			for _, t := range hh.DCGM.Tests {
				if t.GPU == nil || *t.GPU != g.GPU.Index {
					continue
				}
				su.Cases = append(su.Cases, dcgmCase(class, t, pool))
			}
		}
		su.Cases = append(su.Cases, compareCases(class, hh.Comparisons, g.GPU.Index, pool)...)
		su.Cases = append(su.Cases, nvlinkCase(class, hh, g.GPU.Index, pool)...)
		su.Cases = append(su.Cases, pool.rest(class)...)
		labelCases(su.Cases[first:], fmt.Sprintf("gpu %d", g.GPU.Index), map[string]any{"node": h.Name, "gpu": g.GPU.Index, "gpu_name": g.GPU.Name})
	}
	class := "gpuvet.health." + classPart(h.Name)
	pool := newPool(seen, hh.Flags)
	if d := hh.DCGM; d != nil {
		c := failCase(class, "dcgm.diag", pool.take("dcgm"))
		switch {
		case d.Status == results.StatusFailed && c.Failure == nil:
			c.Error = &junitProblem{Message: orDash(d.Error), Type: "dcgm.diag"}
		case d.Status == results.StatusSkipped:
			c.Skipped = &junitSkip{Message: "DCGM diagnostics skipped: " + orDash(d.Note)}
		}
		su.Cases = append(su.Cases, c)
	}
	if hh.ExpectGPUs > 0 {
		su.Cases = append(su.Cases, failCase(class, "health.gpu_count", pool.take("count")))
	}
	su.Cases = append(su.Cases, interconnectCases(class, hh, pool)...)
	if hh.Error != "" {
		su.Cases = append(su.Cases, junitCase{Classname: class, Name: "health.phase", Error: &junitProblem{Message: hh.Error, Type: "health"}})
	}
	su.Cases = append(su.Cases, pool.rest(class)...)
	return su
}

// labelCases gives cases the subject and labels CTRF shows with them. A case with no labels of its
// own shares extra (nothing changes a case's labels after this): a map per case was a fifth of a
// 1,000-node run's peak heap.
func labelCases(cs []junitCase, subject string, extra map[string]any) {
	for i := range cs {
		cs[i].Subject = subject
		x := cs[i].Extra // a case's own labels (its layer and action) stay
		if x == nil {
			cs[i].Extra = extra
			continue
		}
		maps.Copy(x, extra)
	}
}

func dcgmCase(class string, t results.DCGMTest, pool *flagPool) junitCase {
	c := failCase(class, "dcgm."+t.Name, pool.take("dcgm."+t.Name))
	switch t.Result {
	case "fail":
		if c.Failure == nil {
			c.Failure = &junitProblem{Message: "DCGM " + t.Name + " failed: " + orDash(t.Info), Type: "dcgm"}
		}
	case "skip":
		c.Skipped = &junitSkip{Message: "DCGM skipped " + t.Name + ": " + orDash(t.Info)}
	case "warn":
		c.SystemOut = "DCGM warning: " + orDash(t.Info)
	}
	return c
}

// compareCases makes one case per comparison metric for one GPU.
func compareCases(class string, cs []results.Compare, gpu int, pool *flagPool) []junitCase {
	var out []junitCase
	for _, c := range cs {
		for _, v := range c.Values {
			if v.GPU != gpu {
				continue
			}
			jc := junitCase{Classname: class, Name: "compare." + c.Metric}
			switch {
			case v.Flagged:
				pool.take("compare.")
				reason := v.Reason
				if reason == "" {
					reason = fmt.Sprintf("%s %s is %.1f %% worse than the best card (%s), beyond %g %%", c.Metric, num(v.Value), v.DeltaPct, num(c.Best), c.VariancePct)
				}
				jc.Failure = &junitProblem{Message: reason, Type: "compare.gpu_to_gpu", Text: reason}
			case c.ClientLimited: // the judge leaves the GPU inconclusive on it, as on the two below
				jc.Skipped, jc.Inconclusive = &junitSkip{Message: "inconclusive: " + orDash(c.Note)}, true
			case c.LowConfidence:
				jc.Skipped, jc.Inconclusive = &junitSkip{Message: "inconclusive: low confidence: " + orDash(c.Note)}, true
			case v.Inconclusive:
				jc.Skipped, jc.Inconclusive = &junitSkip{Message: "inconclusive: " + orDash(v.Reason)}, true
			case v.LowerBound:
				jc.Skipped = &junitSkip{Message: "lower bound (truncated or unsaturated sweep): not compared"}
			}
			out = append(out, jc)
		}
	}
	return out
}

func modelSuite(h results.Host, m results.Model, seen map[results.Flag]bool) junitSuite {
	su := junitSuite{Name: "gpuvet.model." + h.Name + "." + m.Model}
	for _, e := range m.Endpoints {
		class := "gpuvet.model." + classPart(h.Name) + "." + classPart(m.Model) + "." + strings.ReplaceAll(gpuList(e.GPUs), " ", "")
		pool := newPool(seen, e.Flags)
		first := len(su.Cases)
		serve := junitCase{Classname: class, Name: "serve"}
		switch {
		case e.Status == results.StatusNotRun:
			serve.Error = &junitProblem{Message: "not run: the run stopped before this GPU", Type: "not_run"}
		case e.Status == results.StatusInterrupted:
			serve.Error = &junitProblem{Message: "interrupted: " + orDash(e.Error), Type: "interrupted", Text: e.LogTail}
		case e.Error != "":
			serve.Error = &junitProblem{Message: e.Error, Type: "serve", Text: e.LogTail}
		}
		su.Cases = append(su.Cases, serve)
		if e.Load != nil && e.Load.Error != "" {
			su.Cases = append(su.Cases, junitCase{Classname: class, Name: "load", Error: &junitProblem{Message: e.Load.Error, Type: "load"}})
		}
		for _, v := range e.Verdicts {
			c := failCase(class, v.Check, pool.take(v.Check))
			switch v.Result {
			case "fail":
				if c.Failure == nil {
					msg := orDash(v.Reason)
					if v.Reason == "" && v.Value != nil {
						msg = fmt.Sprintf("%s: measured %s %s", v.Rule, num(*v.Value), v.Unit)
					}
					c.Failure = &junitProblem{Message: msg, Type: v.Check, Text: msg}
				}
			case "inconclusive":
				c.Failure = nil
				c.Skipped, c.Inconclusive = &junitSkip{Message: "inconclusive: " + orDash(v.Reason)}, true
			case "disabled":
				c.Skipped = &junitSkip{Message: "gate disabled: " + orDash(v.Reason)}
			default:
				if c.Failure == nil {
					c.SystemOut = v.Rule + " — source: " + v.Source
				}
			}
			su.Cases = append(su.Cases, c)
		}
		if f := e.Functional; f != nil {
			for _, t := range f.Tests {
				c := failCase(class, "functional."+t.Name, pool.take("functional."+t.Name))
				if !t.Passed && c.Failure == nil {
					c.Failure = &junitProblem{Message: orDash(t.Detail), Type: "functional", Text: t.Detail}
				}
				su.Cases = append(su.Cases, c)
			}
			if f.Error != "" {
				su.Cases = append(su.Cases, junitCase{Classname: class, Name: "functional.suite", Error: &junitProblem{Message: f.Error, Type: "functional"}})
			}
		}
		if len(e.GPUs) > 0 {
			su.Cases = append(su.Cases, compareCases(class, m.Comparisons, e.GPUs[0], pool)...)
		}
		su.Cases = append(su.Cases, pool.rest(class)...)
		labelCases(su.Cases[first:], m.Model+" "+gpuList(e.GPUs), map[string]any{"node": h.Name, "gpus": e.GPUs, "gpu_name": e.GPUName, "model": m.Model})
	}
	class := "gpuvet.model." + classPart(h.Name) + "." + classPart(m.Model)
	if m.Error != "" {
		su.Cases = append(su.Cases, junitCase{Classname: class, Name: "model", Error: &junitProblem{Message: m.Error, Type: "model"}})
	}
	su.Cases = append(su.Cases, newPool(seen, m.Flags).rest(class)...)
	return su
}

// hostSuite holds what belongs to a host but to none of its GPUs or models: a broken discovery or
// host, and host-level flags (e.g. a GPU count mismatch) no other case explains.
func hostSuite(h results.Host, seen map[results.Flag]bool) junitSuite {
	su := junitSuite{Name: "gpuvet.host." + h.Name}
	class := "gpuvet.host." + classPart(h.Name)
	if h.Error != "" || h.Discovery.Error != "" {
		msg := strings.Trim(h.Error+"; "+h.Discovery.Error, "; ")
		su.Cases = append(su.Cases, junitCase{Classname: class, Name: "host", Error: &junitProblem{Message: msg, Type: "host"}})
	}
	su.Cases = append(su.Cases, newPool(seen, h.Flags).rest(class)...)
	return su
}

func runSuite(s *results.Summary, seen map[results.Flag]bool) junitSuite {
	su := junitSuite{Name: "gpuvet.run"}
	pool := newPool(seen, s.Flags)
	if b := s.Baseline; b != nil {
		pool.take("baseline")
		for _, r := range b.Rows {
			for _, env := range b.Environments {
				st, ok := r.Status[env]
				if !ok {
					continue
				}
				c := junitCase{Classname: "gpuvet.baseline." + classPart(env) + "." + classPart(r.Subject), Name: "baseline." + r.Metric}
				switch st {
				case "breach":
					msg := fmt.Sprintf("%s %s in %s: %s vs %s on bare metal (%s overhead)", r.Subject, r.Metric, env, num(r.Values[env]), num(r.Baseline), signedPct(r.OverheadPct[env]))
					c.Failure = &junitProblem{Message: msg, Type: "baseline.overhead", Text: msg}
				case "low_confidence", "lower_bound":
					c.Skipped = &junitSkip{Message: strings.TrimSuffix(st+": not judged; "+r.Notes[env], "; ")}
				case "missing":
					c.Skipped = &junitSkip{Message: strings.TrimSuffix("not measured in "+env+"; "+r.Notes[env], "; ")}
				}
				su.Cases = append(su.Cases, c)
			}
		}
	}
	if s.Error != "" {
		su.Cases = append(su.Cases, junitCase{Classname: "gpuvet.run", Name: "run", Error: &junitProblem{Message: s.Error, Type: "run"}})
	}
	if !s.Complete {
		// A killed or interrupted run never passes CI: its file says so whatever else it holds.
		msg := fmt.Sprintf("the run did not finish (complete: false, status %s): its figures are partial", s.Status)
		su.Cases = append(su.Cases, junitCase{Classname: "gpuvet.run", Name: "run.complete", Error: &junitProblem{Message: msg, Type: "incomplete"}})
	}
	su.Cases = append(su.Cases, pool.rest("gpuvet.run")...)
	// The run's own verdict, as every other surface shows it.
	su.Cases = append(su.Cases, verdictCase("gpuvet.run", "run.status", "run", s.Status, "run "+string(s.Status), "", s.Layers, s.Action, map[string]any{}))
	return su
}

// fleetSuite holds a fleet's node-to-node comparison, one case per node and figure, and the nodes
// the backend skipped.
func fleetSuite(s *results.Summary) junitSuite {
	su := junitSuite{Name: "gpuvet.fleet"}
	if s.Fleet == nil {
		return su
	}
	for _, c := range s.Fleet.Comparisons {
		for _, v := range c.Values {
			jc := junitCase{Classname: "gpuvet.fleet", Name: fmt.Sprintf("compare.node_to_node %s node %s", c.Metric, v.Host),
				Extra: map[string]any{"node": v.Host, "metric": c.Metric, "value": v.Value, "delta_pct": v.DeltaPct, "variance_pct": c.VariancePct}}
			switch {
			case v.Flagged:
				jc.Failure = &junitProblem{Message: orDash(v.Reason), Type: "compare.node_to_node", Text: v.Reason}
			case c.LowConfidence:
				jc.Skipped, jc.Inconclusive = &junitSkip{Message: "low confidence: " + orDash(c.Note)}, true
			case v.Inconclusive:
				jc.Skipped, jc.Inconclusive = &junitSkip{Message: "inconclusive: " + orDash(v.Reason)}, true
			}
			su.Cases = append(su.Cases, jc)
		}
	}
	for _, sk := range s.Fleet.Skipped {
		su.Cases = append(su.Cases, junitCase{Classname: "gpuvet.fleet", Name: "node " + sk.Name, Skipped: &junitSkip{Message: sk.Reason},
			Extra: map[string]any{"node": sk.Name}})
	}
	return su
}

// firstLine is the first line of s.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
