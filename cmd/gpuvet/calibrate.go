package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// calibrateOptions are `gpuvet calibrate`'s flags and arguments.
type calibrateOptions struct {
	opt    judge.CalibrateOptions
	gpus   []int // --gpus: the GPUs to learn from in a run that is not ok
	paths  []string
	runs   []judge.CalibRun
	labels []string
}

func newCalibrateCmd() *cobra.Command {
	c := calibrateOptions{opt: judge.DefaultCalibrateOptions()}
	opt := &c.opt // the flags below set it
	cmd := &cobra.Command{
		Use:   "calibrate RUN1.json RUN2.json ...",
		Short: "Turn 2–3 runs on known-healthy hardware into reference-table entries (YAML to paste under reference:)",
		Long: `calibrate reads summary.json files from runs on known-healthy hardware and prints, per exact GPU
name × model id, the reference-table entry the calibration rule gives: ttft_p95_ms = worst sync TTFT
p95 + 30 %, min_throughput_req_s = worst sustained req/s − 25 % (sweeps that are only a lower bound are
left out), itl_p95_ms left at the global gate unless --itl. From the runs' health phases it also
prints reference_floors per exact GPU name: each microbenchmark's (and the burn's, peer copy's,
all-reduce's) worst ratio to the datasheet peak − 25 %; and the GPU-to-GPU margin
compare.variance_pct (1.5 × the largest healthy gap, at least 3 %). The figures used are printed as
comments.

It learns only from health: a run whose status is not ok is refused unless --gpus names the GPUs to
learn from, and every table leaves out each GPU whose verdict is not ok (flagged, failed,
inconclusive), that was busy, or whose load was client-limited, saying which and why.`,
		Args: cobra.MinimumNArgs(1),
		RunE: phases(&c),
	}
	cmd.Flags().IntSliceVar(&c.gpus, "gpus", nil, "GPU indexes to learn from, for runs that are not ok (each must still be ok itself), e.g. 0,1,3")
	cmd.Flags().BoolVar(&opt.ITL, "itl", false, "also write itl_p95_ms (worst sync ITL p95 + the TTFT margin)")
	cmd.Flags().Float64Var(&opt.TTFTMarginPct, "ttft-margin", opt.TTFTMarginPct, "% added to the worst sync TTFT p95")
	cmd.Flags().Float64Var(&opt.ThroughputMarginPct, "throughput-margin", opt.ThroughputMarginPct, "% taken off the worst sustained req/s")
	return cmd
}

func (c *calibrateOptions) Complete(_ *cobra.Command, args []string) error {
	c.paths = args
	return nil
}

// Validate checks the margins and reads every run: a file that is not a summary is bad input.
func (c *calibrateOptions) Validate() error {
	opt := c.opt
	if opt.TTFTMarginPct < 0 || opt.ThroughputMarginPct < 0 || opt.ThroughputMarginPct >= 100 {
		return usageErr("margins: --ttft-margin %g and --throughput-margin %g must be ≥ 0 (throughput below 100)", opt.TTFTMarginPct, opt.ThroughputMarginPct)
	}
	c.runs, c.labels = nil, nil
	for _, p := range c.paths {
		s, err := results.Read(p)
		if err != nil {
			return usageErr("%v", err)
		}
		label := p // by its path: two runs are often both summary.json
		if why := judge.NotOK(s); why != "" && len(c.gpus) == 0 {
			return usageErr("calibrate: %s: %s: calibrate learns only from healthy runs (a straggler it learned from would pass from then on); give ok runs, or name the GPUs to learn from with --gpus", label, why)
		}
		if err := gpusIn(label, s, c.gpus); err != nil {
			return err
		}
		c.runs = append(c.runs, judge.CalibRun{Label: label, Summary: s, GPUs: c.gpus})
		c.labels = append(c.labels, label)
	}
	return nil
}

// Run prints the reference-table entries and the datasheet floors the runs give.
func (c *calibrateOptions) Run(cmd *cobra.Command) error {
	floors := judge.CalibrateFloors(c.runs, results.FloorMarginPct)
	entries, err := judge.Calibrate(c.runs, c.opt)
	if err != nil && len(floors) == 0 {
		return usageErr("%v", err)
	}
	if err == nil {
		if err := judge.WriteCalibrationYAML(cmd.OutOrStdout(), entries, c.labels, c.opt); err != nil {
			return failedErr("%v", err)
		}
	}
	// The datasheet floors of the GPUs' microbenchmarks, from the runs' health phases.
	if err := judge.WriteFloorsYAML(cmd.OutOrStdout(), floors, results.FloorMarginPct); err != nil {
		return failedErr("%v", err)
	}
	// The GPU-to-GPU margin (compare.variance_pct), from the runs' comparisons (issue 35).
	if err := judge.WriteMarginYAML(cmd.OutOrStdout(), c.runs); err != nil {
		return failedErr("%v", err)
	}
	if !learned(entries, floors, c.runs) {
		return usageErr("calibrate: learned nothing: every GPU these runs offer was left out (the reasons are above); give runs that ended ok, or name ok GPUs with --gpus")
	}
	return nil
}

// gpusIn checks that every GPU --gpus names is one of the run's: naming GPU 7 of a 2-GPU run is a
// typo, not a choice to learn nothing.
func gpusIn(label string, s *results.Summary, gpus []int) error {
	var have []int
	for _, h := range s.Hosts {
		have = append(have, h.ServedGPUs()...)
		for _, g := range h.GPUs {
			have = append(have, g.Index)
		}
	}
	slices.Sort(have)
	have = slices.Compact(have)
	for _, g := range gpus {
		if !slices.Contains(have, g) {
			return usageErr("calibrate --gpus %d: %s has no GPU %d (its GPUs: %s)", g, label, g, strings.ReplaceAll(strings.Trim(fmt.Sprint(have), "[]"), " ", ", "))
		}
	}
	return nil
}

// learned says whether any table got a value: otherwise the output is comments only.
func learned(entries []judge.CalibEntry, floors []judge.FloorEntry, runs []judge.CalibRun) bool {
	for _, e := range entries {
		if e.TTFTP95Ms != nil || e.MinReqS != nil || e.ITLP95Ms != nil {
			return true
		}
	}
	for _, f := range floors {
		if len(f.Floors) > 0 {
			return true
		}
	}
	_, ok := judge.CalibrateMargin(runs)
	return ok
}
