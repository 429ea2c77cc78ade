package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gpuvet/gpuvet/internal/history"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// historyOptions are the flags every `gpuvet history` subcommand shares: the store is the plan's
// history section's.
type historyOptions struct {
	cf    configFlags
	node  string
	gpu   string
	limit int
}

func (o *historyOptions) register(cmd *cobra.Command, subject bool) {
	o.cf.register(cmd)
	if subject {
		cmd.Flags().StringVar(&o.node, "node", "", "one node (host name)")
		cmd.Flags().StringVar(&o.gpu, "gpu", "", "one GPU, by UUID (followed across nodes)")
	}
}

// open resolves the plan and opens its store (exit 2 when it cannot) for the length of fn.
func (o *historyOptions) open(ctx context.Context, fn func(*history.Store) error) error {
	p, err := o.cf.plan()
	if err != nil {
		return err
	}
	st, err := history.Open(ctx, p.Config.History)
	if err != nil {
		return usageErr("%v", err)
	}
	defer st.Close()
	return fn(st)
}

func newHistoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Each node and GPU against its own past: list runs, show a trend, pin an acceptance run, export",
		Long: `Every run (host or fleet, every backend) is kept in the history store: SQLite under gpuvet's state
directory by default, PostgreSQL with history.url (the password from the variable history.password_env
names). Each node and GPU is compared with its acceptance run: its first ok run under the same plan
fingerprint, or the run pinned here. See docs/history.md.`,
	}
	cmd.AddCommand(newHistoryRunsCmd(), newHistoryTrendCmd(), newHistoryPinCmd(), newHistoryExportCmd())
	return cmd
}

func newHistoryRunsCmd() *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the recorded runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.open(cmd.Context(), func(st *history.Store) error {
				runs, err := st.Runs(cmd.Context(), o.node, o.limit)
				if err != nil {
					return failedErr("history: %v", err)
				}
				t := term.NewTable(cmd.OutOrStdout(), "started (UTC)", "run", "status", "backend", "nodes", "plan", "gpuvet")
				for _, r := range runs {
					t.Row(r.StartedAt.Format("2006-01-02 15:04"), r.ID, r.Status, r.Backend, term.Names(r.Nodes, 3), r.Fingerprint, r.ToolVersion)
				}
				t.Flush()
				return nil
			})
		},
	}
	o.cf.register(cmd)
	cmd.Flags().StringVar(&o.node, "node", "", "only runs that measured this node")
	cmd.Flags().IntVar(&o.limit, "limit", 50, "at most this many runs (0: all)")
	return cmd
}

func newHistoryTrendCmd() *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "trend (--node NAME | --gpu UUID)",
		Short: "A node's (the median of its GPUs) or a GPU's figures over its runs, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (o.node == "") == (o.gpu == "") {
				return usageErr("trend: give one of --node NAME or --gpu UUID")
			}
			return o.open(cmd.Context(), func(st *history.Store) error {
				pts, err := st.Trend(cmd.Context(), o.node, o.gpu, "", o.limit)
				if err != nil {
					return failedErr("history: %v", err)
				}
				if len(pts) == 0 { // a name that is not in the store: bad input, not an empty trend
					what := "--node " + o.node
					if o.gpu != "" {
						what = "--gpu " + o.gpu
					}
					return usageErr("trend %s: no run of it in the history store; `gpuvet history runs` lists the runs and their nodes", what)
				}
				term.Trend(cmd.OutOrStdout(), pts)
				return nil
			})
		},
	}
	o.register(cmd, true)
	cmd.Flags().IntVar(&o.limit, "limit", 100, "the newest this many runs")
	return cmd
}

func newHistoryPinCmd() *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "pin RUN_ID [--node NAME | --gpu UUID]",
		Short: "Make a run the acceptance of one node, one GPU, or everything it measured (under its plan)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.node != "" && o.gpu != "" {
				return usageErr("pin: give --node or --gpu, not both")
			}
			return o.open(cmd.Context(), func(st *history.Store) error {
				pinned, err := st.Pin(cmd.Context(), args[0], o.node, o.gpu)
				if err != nil {
					return usageErr("history: %v", err)
				}
				for _, p := range pinned {
					fmt.Fprintf(cmd.OutOrStdout(), "pinned %s: acceptance run %s\n", p, args[0])
				}
				return nil
			})
		},
	}
	o.register(cmd, true)
	return cmd
}

func newHistoryExportCmd() *cobra.Command {
	o := &historyOptions{}
	var format, out string
	cmd := &cobra.Command{
		Use:   "export [--node NAME] [--gpu UUID] [--format csv|json] [-o FILE]",
		Short: "Every stored figure with its interval and run, as CSV or JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "csv" && format != "json" {
				return usageErr("--format %q: want csv or json", format)
			}
			if out == "-" {
				out = "" // stdout, as asked
			}
			if out != "" {
				if err := checkReplaceable(out); err != nil {
					return usageErr("-o: %v", err)
				}
			}
			return o.open(cmd.Context(), func(st *history.Store) error {
				rows, err := st.Export(cmd.Context(), o.node, o.gpu)
				if err != nil {
					return failedErr("history: %v", err)
				}
				if out == "" {
					err = writeExport(cmd.OutOrStdout(), format, rows)
				} else {
					err = results.ReplaceFile(out, func(w io.Writer) error { return writeExport(w, format, rows) })
				}
				if err != nil {
					return failedErr("export: %v", err)
				}
				return nil
			})
		},
	}
	o.register(cmd, true)
	cmd.Flags().StringVar(&format, "format", "csv", "csv or json")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file, replaced whole (default, or -: stdout)")
	return cmd
}

// exportHeader is the CSV's columns, one per field of history.Row.
var exportHeader = []string{"run_id", "started_at", "fingerprint", "host", "uuid", "model", "metric", "unit", "value", "ci_lo", "ci_hi", "ci_level",
	"samples", "higher_is_better", "lower_bound", "client_limited", "req_s", "judged"}

func writeExport(w io.Writer, format string, rows []history.Row) error {
	if format == "json" {
		if rows == nil {
			rows = []history.Row{}
		}
		return printJSON(w, rows)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(exportHeader); err != nil {
		return err
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, r := range rows {
		lo, hi, lvl := "", "", ""
		if r.CI != nil {
			lo, hi, lvl = g(r.CI.Lo), g(r.CI.Hi), g(r.CI.Level)
		}
		if err := cw.Write([]string{r.RunID, r.StartedAt.Format("2006-01-02T15:04:05.000Z"), r.Fingerprint, r.Host, r.UUID, r.Model, r.Metric, r.Unit,
			g(r.Value), lo, hi, lvl, strconv.Itoa(r.Samples), strconv.FormatBool(r.HigherIsBetter), strconv.FormatBool(r.LowerBound),
			strconv.FormatBool(r.ClientLimited), g(r.ReqS), strconv.FormatBool(r.Judged)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
