package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

func init() { root.AddCommand(newCalibrateCmd()) }

func newCalibrateCmd() *cobra.Command {
	opt := judge.DefaultCalibrateOptions()
	cmd := &cobra.Command{
		Use:   "calibrate RUN1.json RUN2.json ...",
		Short: "Turn 2–3 runs on known-healthy hardware into reference-table entries (YAML to paste under reference:)",
		Long: `calibrate reads summary.json files from runs on known-healthy hardware and prints, per exact GPU
name × model id, the reference-table entry the calibration rule gives: ttft_p95_ms = worst sync TTFT
p95 + 30 %, min_throughput_req_s = worst sustained req/s − 25 % (sweeps that are only a lower bound are
left out), itl_p95_ms left at the global gate unless --itl. From the runs' health phases it also
prints reference_floors per exact GPU name: each microbenchmark's (and the burn's, peer copy's,
all-reduce's) worst ratio to the datasheet peak − 25 %; a GPU that was busy is left out. The figures
used are printed as comments.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opt.TTFTMarginPct < 0 || opt.ThroughputMarginPct < 0 || opt.ThroughputMarginPct >= 100 {
				return usageErr("margins: --ttft-margin %g and --throughput-margin %g must be ≥ 0 (throughput below 100)", opt.TTFTMarginPct, opt.ThroughputMarginPct)
			}
			var runs []judge.CalibRun
			var labels []string
			for _, p := range args {
				s, err := results.Read(p)
				if err != nil {
					return usageErr("%v", err)
				}
				label := p // by its path: two runs are often both summary.json
				runs = append(runs, judge.CalibRun{Label: label, Summary: s})
				labels = append(labels, label)
			}
			floors := judge.CalibrateFloors(runs, results.FloorMarginPct)
			entries, err := judge.Calibrate(runs, opt)
			if err != nil && len(floors) == 0 {
				return usageErr("%v", err)
			}
			if err == nil {
				if err := judge.WriteCalibrationYAML(cmd.OutOrStdout(), entries, labels, opt); err != nil {
					return err
				}
			}
			// The datasheet floors of the GPUs' microbenchmarks, from the runs' health phases.
			if err := judge.WriteFloorsYAML(cmd.OutOrStdout(), floors, results.FloorMarginPct); err != nil {
				return err
			}
			// The GPU-to-GPU margin (compare.variance_pct), from the runs' comparisons (issue 35).
			return judge.WriteMarginYAML(cmd.OutOrStdout(), runs)
		},
	}
	cmd.Flags().BoolVar(&opt.ITL, "itl", false, "also write itl_p95_ms (worst sync ITL p95 + the TTFT margin)")
	cmd.Flags().Float64Var(&opt.TTFTMarginPct, "ttft-margin", opt.TTFTMarginPct, "% added to the worst sync TTFT p95")
	cmd.Flags().Float64Var(&opt.ThroughputMarginPct, "throughput-margin", opt.ThroughputMarginPct, "% taken off the worst sustained req/s")
	return cmd
}
