// Command reportscale measures what a large fleet's outputs cost (issue 31). From a real single-host
// summary.json it builds a synthetic fleet (N nodes × 8 GPUs, each node the measured host scaled per
// node: 1 % noise per GPU, one straggler 15 % slower, one node whose load Jobs failed, one that never
// became Ready), judges it as a fleet run does (node to node, gates, roll-up), and prints for each
// size: summary.json's size and the time to write and read it back, report.html's size and the
// time to write it, the other reports' sizes, the terminal summary's line count, the worst nodes as
// ranked, and the time headless Chromium takes to load and lay out report.html.
//
//	go run ./cmd/gpuvet run --sim --sim-gpus 8 --out /tmp/rs        # the measured host
//	go run ./bench/reportscale -summary /tmp/rs/summary.json -nodes 100,1000
//
// Targets (issue 31): summary.json and report.html under 10 MB, and under 2 s to render, at 1,000 × 8.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/fleetview/synth"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

func main() {
	src := flag.String("summary", "", "a single-host summary.json to scale (e.g. of gpuvet run --sim --sim-gpus 8)")
	sizes := flag.String("nodes", "100,1000", "fleet sizes, comma-separated")
	gpus := flag.Int("gpus", 8, "GPUs per node")
	out := flag.String("out", "", "keep each fleet's files in OUT/N (default: a temporary folder, removed)")
	render := flag.Int("render", 3, "time Chromium's render of report.html this many times and print the median (0: not; skipped, saying so, without Chromium)")
	flag.Parse()
	if *src == "" {
		fmt.Fprintln(os.Stderr, "reportscale: -summary is required: make one with `go run ./cmd/gpuvet run --sim --sim-gpus 8 --out /tmp/rs` and pass -summary /tmp/rs/summary.json")
		os.Exit(2)
	}
	base, err := results.Read(*src)
	if err != nil {
		fail(err)
	}
	if len(base.Hosts) != 1 {
		fail(fmt.Errorf("%s has %d hosts: give a single-host summary", *src, len(base.Hosts)))
	}
	dir := *out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gpuvet-reportscale-*"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(dir)
	}
	fmt.Printf("source: %s (%d GPUs on %s)\n", *src, len(base.Hosts[0].Discovery.GPUs), base.Hosts[0].Name)
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			fail(fmt.Errorf("-nodes %q: want counts of 2 or more", f))
		}
		if err := measure(base, n, *gpus, filepath.Join(dir, strconv.Itoa(n)), *render); err != nil {
			fail(err)
		}
	}
}

func measure(base *results.Summary, nodes, gpus int, dir string, render int) error {
	o := synth.Defaults()
	o.Nodes, o.GPUs = nodes, gpus
	t0 := time.Now()
	s, err := synth.Fleet(base, o)
	if err != nil {
		return err
	}
	plan, err := config.Load(config.Options{})
	if err != nil {
		return err
	}
	t1 := time.Now()
	if err := judge.Fleet(s, plan); err != nil {
		return err
	}
	judged := time.Since(t1)
	fmt.Printf("\n== %s nodes × %d GPUs (built in %s, judged in %s): run status %s\n", term.Count(nodes), gpus, t1.Sub(t0).Round(time.Millisecond), judged.Round(time.Millisecond), s.Status)

	sum := filepath.Join(dir, "summary.json")
	var written *results.Summary
	d, err := timed(func() (err error) { written, err = fleet.WriteSummary(dir, s, os.Stderr); return err })
	if err != nil {
		return err
	}
	line("summary.json", size(sum), fmt.Sprintf("written in %s, with the %d hosts' own files (hosts/, %s in all); %s a node", d, len(s.Hosts), dirSize(filepath.Join(dir, fleet.HostsDir)), perNode(sum, nodes)))
	if err := breakdown(sum); err != nil {
		return err
	}
	if written == s {
		line("", "", "(every host in full: the fleet is too small for a digest)")
	}
	baseline := filepath.Join(dir, "baseline.json")
	d, err = timed(func() error { return fleet.WriteBaseline(dir, s) })
	if err != nil {
		return err
	}
	line("baseline.json", size(baseline), fmt.Sprintf("written in %s (--save-baseline: the digest and the intervals and rungs a comparison against it weighs); %s a node", d, perNode(baseline, nodes)))
	var back *results.Summary
	d, err = timed(func() (err error) { back, err = results.Read(sum); return err })
	if err != nil {
		return err
	}
	line("", "", "read back in "+d.String())

	html := filepath.Join(dir, report.HTMLFile)
	d, err = timed(func() error { return report.WriteHTML(s, html) })
	if err != nil {
		return err
	}
	line("report.html", size(html), "written in "+d.String()+" (from the run's full summary, as a fleet run writes it)")
	rebuilt := filepath.Join(dir, "rebuilt.html")
	d, err = timed(func() error {
		full, err := report.WithDetails(back, dir) // as `gpuvet report` does: the hosts shown in full from their files
		if err != nil {
			return err
		}
		return report.WriteHTML(full, rebuilt)
	})
	if err != nil {
		return err
	}
	line("", size(rebuilt), "rebuilt from summary.json and the hosts it shows in full in "+d.String()+" (gpuvet report)")
	for _, w := range []struct {
		name  string
		write func(*results.Summary, string) error
	}{{report.JUnitFile, report.WriteJUnit}, {report.CTRFFile, report.WriteCTRF}, {report.PrometheusFile, report.WritePrometheus}} {
		p := filepath.Join(dir, w.name)
		d, err := timed(func() error { return w.write(back, p) })
		if err != nil {
			return err
		}
		line(w.name, size(p), "written in "+d.String())
	}
	var tb bytes.Buffer
	d, _ = timed(func() error { fleet.Render(&tb, back); return nil })
	line("terminal", fmt.Sprintf("%d lines", strings.Count(tb.String(), "\n")), "in "+d.String())

	v := fleetview.Build(back, fleetview.Models(back)[0])
	var worst []string
	for _, n := range v.Nodes {
		if n.Status != results.StatusOK {
			worst = append(worst, fmt.Sprintf("%s %s", n.Name, n.Status))
		}
	}
	fmt.Printf("  nodes not ok, worst first: %s\n", strings.Join(worst, ", "))

	if render <= 0 {
		return nil
	}
	if _, err := report.FindChromium(); err != nil {
		fmt.Printf("  render: skipped: %v\n", err)
		return nil
	}
	blank := filepath.Join(dir, "blank.html")
	if err := os.WriteFile(blank, []byte("<!DOCTYPE html><title>blank</title><p>blank"), 0o644); err != nil {
		return err
	}
	var starts, fulls []time.Duration
	for range render {
		start, err := timed(func() error { _, err := report.Render(blank, 2*time.Minute); return err })
		if err != nil {
			return err
		}
		var dom []byte
		full, err := timed(func() (err error) { dom, err = report.Render(html, 5*time.Minute); return err })
		if err != nil {
			return err
		}
		if !bytes.Contains(dom, []byte(`id="fleet-map"`)) {
			return fmt.Errorf("chromium's DOM of %s has no fleet section: the render was not of the report", html)
		}
		starts, fulls = append(starts, start), append(fulls, full)
	}
	start, full := median(starts), median(fulls)
	line("render", full.String(), fmt.Sprintf("median of %d in Chromium headless (load, layout, paint); a blank page takes %s, so the report's own share is %s", render, start, (full-start).Round(time.Millisecond)))
	return nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// breakdown prints what summary.json's bytes go to, as written: each host's entry by part, over
// all hosts, and the fleet's node-to-node comparisons.
func breakdown(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s struct {
		Hosts []struct {
			Discovery, Health json.RawMessage
			Models            []struct {
				Comparisons json.RawMessage
				Endpoints   []map[string]json.RawMessage
			}
		}
		Fleet json.RawMessage
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	parts := map[string]int{}
	add := func(k string, v json.RawMessage) {
		var c bytes.Buffer
		if json.Compact(&c, v) == nil {
			parts[k] += c.Len()
		}
	}
	for _, h := range s.Hosts {
		add("hosts[].discovery", h.Discovery)
		add("hosts[].health", h.Health)
		for _, m := range h.Models {
			add("hosts[].models[].comparisons", m.Comparisons)
			for _, e := range m.Endpoints {
				for k, v := range e {
					add("hosts[].models[].endpoints[]."+k, v)
				}
			}
		}
	}
	add("fleet", s.Fleet)
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return parts[keys[i]] > parts[keys[j]] })
	var out []string
	for _, k := range keys[:min(5, len(keys))] {
		out = append(out, fmt.Sprintf("%s %.2f MB", k, float64(parts[k])/1e6))
	}
	line("", "", "largest parts (compact): "+strings.Join(out, ", "))
	return nil
}

// perNode is a file's size over the fleet's nodes.
func perNode(path string, nodes int) string {
	st, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f KB", float64(st.Size())/1e3/float64(nodes))
}

func dirSize(dir string) string {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := d.Info(); err == nil {
				n += st.Size()
			}
		}
		return nil
	})
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}

func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t).Round(time.Millisecond), err
}

func size(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.2f MB", float64(st.Size())/1e6)
}

func line(what, figure, note string) {
	fmt.Printf("  %-14s %-12s %s\n", what, figure, note)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "reportscale:", err)
	os.Exit(1)
}
