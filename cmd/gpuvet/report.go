package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// reportOptions are `gpuvet report`'s flags and argument: Complete -> Validate -> Run.
type reportOptions struct {
	html, pdf, junit, prom, ctrf string
	hosts                        []string         // --host: only these hosts of a fleet's summary
	path                         string           // the summary.json
	summary                      *results.Summary // read by Validate
}

func newReportCmd() *cobra.Command {
	var o reportOptions
	cmd := &cobra.Command{
		Use:   "report SUMMARY.json",
		Short: "Rebuild the report of a run from its summary.json: HTML, PDF, JUnit XML, Prometheus textfile",
		Long: `Rebuild the report of a run from its summary.json alone.

With no output flag, writes report.html next to the summary. The HTML is one self-contained file
(inline SVG charts, no script, no network). --pdf prints it through headless Chromium (chromium,
chromium-browser or google-chrome on PATH, or $GPUVET_CHROMIUM). --junit writes one test case per
check for CI systems; --prom writes a node-exporter textfile of the headline figures and statuses.

A large fleet's report shows every node in its heat map and ranked list, and the worst ten in full;
--host NAME (repeatable) writes the outputs of just those hosts, each in full.`,
		Example: "  gpuvet report out/summary.json --html report.html --pdf report.pdf --junit junit.xml --prom gpuvet.prom",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flags live as long as the process: reset them so a second execute (tests) starts clean.
			defer func() {
				cmd.Flags().VisitAll(func(f *pflag.Flag) { f.Value.Set(f.DefValue); f.Changed = false })
				o.hosts = nil // a string array's default "[]" set back reads as one host named "[]"
			}()
			o.Complete(args)
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	cmd.Flags().StringVar(&o.html, "html", "", "write the HTML report here (default: report.html beside the summary when no output is given)")
	cmd.Flags().StringVar(&o.pdf, "pdf", "", "write a PDF of the report here (needs Chromium)")
	cmd.Flags().StringVar(&o.junit, "junit", "", "write JUnit XML here")
	cmd.Flags().StringVar(&o.ctrf, "ctrf", "", "write CTRF JSON here (one test per gate, per node and GPU; the format aicr reports in)")
	cmd.Flags().StringVar(&o.prom, "prom", "", "write a Prometheus textfile (node-exporter format) here")
	cmd.Flags().StringArrayVar(&o.hosts, "host", nil, "only this host of a fleet's summary, in full (repeatable)")
	return cmd
}

// Complete takes the summary's path and, when no output is asked for, puts report.html beside it.
func (o *reportOptions) Complete(args []string) {
	o.path = args[0]
	if o.html == "" && o.pdf == "" && o.junit == "" && o.prom == "" && o.ctrf == "" {
		o.html = filepath.Join(filepath.Dir(o.path), "report.html")
	}
}

// Validate reads the summary: one that is not a gpuvet summary is bad input (exit 2).
func (o *reportOptions) Validate() error {
	s, err := results.Read(o.path)
	if err != nil {
		return usageErr("reading the summary: %v: give the summary.json a gpuvet run wrote", err)
	}
	if len(o.hosts) > 0 {
		if s, err = report.HostsOnly(s, o.hosts); err != nil {
			return usageErr("%v", err)
		}
		s = o.withDetails(s) // every output of the chosen hosts in full
	}
	o.summary = s
	given := map[string]string{} // the cleaned path -> the flag that named it
	for _, out := range []struct{ flag, path string }{{"--html", o.html}, {"--junit", o.junit}, {"--ctrf", o.ctrf}, {"--prom", o.prom}, {"--pdf", o.pdf}} {
		if out.path == "" {
			continue
		}
		if err := checkReplaceable(out.path, o.path); err != nil {
			return usageErr("%s: %v", out.flag, err)
		}
		// Two formats into one file: the second would replace the first, and both say "wrote".
		if first, ok := given[filepath.Clean(out.path)]; ok {
			return usageErr("%s and %s both name %s: the second would replace the first; give each format its own file", first, out.flag, out.path)
		}
		given[filepath.Clean(out.path)] = out.flag
	}
	return nil
}

// withDetails reads the hosts rendered in full from hosts/NAME.json beside the summary (a large
// fleet's holds digests); a file that cannot be read is a warning.
func (o *reportOptions) withDetails(s *results.Summary) *results.Summary {
	full, err := report.WithDetails(s, filepath.Dir(o.path))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuvet: WARNING: per-host results:", err)
	}
	return full
}

// Run writes every report asked for from the summary alone.
func (o *reportOptions) Run(cmd *cobra.Command) error {
	s := o.summary
	out := cmd.OutOrStdout()
	html := o.html
	if html == "" && o.pdf != "" {
		// The PDF is printed from an HTML file: use a temporary one when none was asked for.
		dir, err := os.MkdirTemp("", "gpuvet-report-")
		if err != nil {
			return failedErr("%v", err)
		}
		defer os.RemoveAll(dir)
		html = filepath.Join(dir, "report.html")
	}
	if html != "" {
		hs := s
		if len(o.hosts) == 0 {
			hs = o.withDetails(s) // the HTML alone: JUnit, CTRF and Prometheus list every host alike
		}
		if err := report.WriteHTML(hs, html); err != nil {
			return failedErr("writing the HTML report: %v", err)
		}
		if o.html != "" {
			fmt.Fprintln(out, "wrote", o.html)
		}
	}
	for _, w := range []struct {
		path, what string
		write      func(*results.Summary, string) error
	}{{o.junit, "JUnit XML", report.WriteJUnit}, {o.ctrf, "CTRF JSON", report.WriteCTRF}, {o.prom, "the Prometheus textfile", report.WritePrometheus}} {
		if w.path == "" {
			continue
		}
		if err := w.write(s, w.path); err != nil {
			return failedErr("writing %s: %v", w.what, err)
		}
		fmt.Fprintln(out, "wrote", w.path)
	}
	if o.pdf != "" {
		if err := report.WritePDF(html, o.pdf); err != nil {
			if errors.Is(err, report.ErrNoChromium) && o.html != "" {
				return failedErr("%v (the HTML report %s was written)", err, o.html)
			}
			return failedErr("%v", err)
		}
		fmt.Fprintln(out, "wrote", o.pdf)
	}
	return nil
}
