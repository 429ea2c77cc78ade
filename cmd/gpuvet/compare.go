package main

import (
	"encoding/json"
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

func newCompareCmd() *cobra.Command {
	var (
		tolerance  float64
		asJSON     bool
		failOnFlag bool
		cf         configFlags
	)
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
		RunE: func(cmd *cobra.Command, args []string) error {
			var extra []config.Flag
			if cmd.Flags().Changed("tolerance") {
				extra = append(extra, config.Flag{Name: "--tolerance", Path: "compare.baseline_tolerance_pct", Value: strconv.FormatFloat(tolerance, 'g', -1, 64)})
			}
			p, err := cf.plan(extra...)
			if err != nil {
				return err
			}
			cfg := judge.FromPlan(p, nil)
			if err := cfg.Validate(); err != nil {
				return usageErr("%v", err)
			}
			var envs []*results.Summary
			for _, path := range args[1:] {
				s, err := importer.ReadResult(path)
				if err != nil {
					return usageErr("%v", err) // the input the user asked about
				}
				envs = append(envs, s)
			}
			base, note := importer.ReadBaseline(args[0])
			bc := judge.CompareSummaries(base, note, args[0], envs, args[1:], cfg)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(bc); err != nil {
					return failedErr("%v", err)
				}
			} else if err := term.Baseline(out, bc, judge.BaselineFlags(bc)); err != nil {
				return failedErr("%v", err)
			}
			if n := judge.Breaches(bc); n > 0 && failOnFlag {
				return failedErr("%d metric(s) beyond the %g %% tolerance", n, bc.TolerancePct)
			}
			// Nothing compared is no evidence of no overhead: under --fail-on-flag it fails, so a
			// missing or unreadable baseline cannot pass CI silently.
			if len(bc.Rows) == 0 && failOnFlag {
				return failedErr("%s: nothing was compared, and --fail-on-flag needs a comparison", strings.TrimPrefix(bc.Note, "no comparison: "))
			}
			if bc.Note != "" {
				fmt.Fprintln(os.Stderr, "gpuvet:", bc.Note)
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&tolerance, "tolerance", judge.DefaultBaselineTolerance, "breach when a metric is worse than the baseline by more than this %")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON (the summary.json \"baseline\" shape)")
	cmd.Flags().BoolVar(&failOnFlag, "fail-on-flag", false, "exit 1 when any metric breaches the tolerance, or when nothing could be compared")
	cf.register(cmd)
	return cmd
}
