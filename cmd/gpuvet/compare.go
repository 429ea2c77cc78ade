package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/importer"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// compareOptions are `gpuvet compare`'s flags and arguments.
type compareOptions struct {
	tolerance  float64
	asJSON     bool
	failOnFlag bool
	cf         configFlags
	baseline   string
	paths      []string
	cfg        judge.Config
	envs       []*results.Summary
}

func newCompareCmd() *cobra.Command {
	var o compareOptions
	cmd := &cobra.Command{
		Use:   "compare BASELINE.json RESULT.json [RESULT2.json ...]",
		Short: "Line results from other environments up against a bare-metal baseline (overhead % per metric)",
		Long: `compare reads a baseline (a gpuvet summary.json, a vLLM bench result or a guidellm report) and
one or more results, and prints per subject (model × GPU index, GPU microbenchmarks) and metric the
baseline, each environment's value, its overhead % (positive = worse) and status, with the GPU-to-GPU
noise guards and the caveats (driver, engine version, GPU count, load profile, lower-bound sweeps).
The tolerance and guards come from the config (compare.*; -c, --set, GPUVET_* as for run).
A missing or corrupt baseline degrades to "no comparison" with a note (exit 1 under --fail-on-flag).`,
		Args: cobra.MinimumNArgs(2),
		RunE: phases(&o),
	}
	cmd.Flags().Float64Var(&o.tolerance, "tolerance", results.DefaultOf(results.ThBaselineTolerance), "breach when a metric is worse than the baseline by more than this %")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the comparison as JSON (the summary.json \"baseline\" shape)")
	cmd.Flags().BoolVar(&o.failOnFlag, "fail-on-flag", false, "exit 1 when any metric breaches the tolerance, or when nothing could be compared")
	o.cf.register(cmd)
	return cmd
}

// Complete resolves the compare settings from the config (-c, --set, GPUVET_*, --tolerance).
func (o *compareOptions) Complete(cmd *cobra.Command, args []string) error {
	o.baseline, o.paths = args[0], args[1:]
	var extra []config.Flag
	if cmd.Flags().Changed("tolerance") {
		extra = append(extra, config.Flag{Name: "--tolerance", Path: results.ThBaselineTolerance, Value: strconv.FormatFloat(o.tolerance, 'g', -1, 64)})
	}
	p, err := o.cf.plan(extra...)
	if err != nil {
		return err
	}
	o.cfg = judge.FromPlan(p, nil)
	return nil
}

// Validate checks the settings and reads the results asked about (bad input: exit 2). The
// baseline is read by Run: a missing one degrades to "no comparison" with a note.
func (o *compareOptions) Validate() error {
	if err := o.cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	o.envs = nil
	for _, path := range o.paths {
		s, err := importer.ReadResult(path)
		if err != nil {
			return usageErr("%v", err) // the input the user asked about
		}
		o.envs = append(o.envs, s)
	}
	return nil
}

// Run compares the results with the baseline and prints the table (or JSON).
func (o *compareOptions) Run(cmd *cobra.Command) error {
	base, note := importer.ReadBaseline(o.baseline)
	bc := judge.CompareSummaries(base, note, o.baseline, o.envs, o.paths, o.cfg)
	out := cmd.OutOrStdout()
	if o.asJSON {
		if err := printJSON(out, bc); err != nil {
			return failedErr("%v", err)
		}
	} else if err := term.Baseline(out, bc, judge.BaselineFlags(bc)); err != nil {
		return failedErr("%v", err)
	}
	if n := judge.Breaches(bc); n > 0 && o.failOnFlag {
		return failedErr("%d metric(s) beyond the %g %% tolerance", n, bc.TolerancePct)
	}
	// Nothing compared is no evidence of no overhead: under --fail-on-flag it fails, so a
	// missing or unreadable baseline cannot pass CI silently.
	if len(bc.Rows) == 0 && o.failOnFlag {
		return failedErr("%s: nothing was compared, and --fail-on-flag needs a comparison", strings.TrimPrefix(bc.Note, "no comparison: "))
	}
	if bc.Note != "" {
		fmt.Fprintln(os.Stderr, "gpuvet:", bc.Note)
	}
	return nil
}
