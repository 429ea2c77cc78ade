// Command gpuvet vets GPU machines for LLM inference. This package is the CLI only: flags -> plan ->
// calls into internal packages. Each subcommand lives in its own file; newRoot lists them all.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Exit codes (the README's table): 0 ok (or flags without --fail-on-flag); 1 a failure, or a flag
// with --fail-on-flag; 2 bad input found before anything ran (a usageErr; cobra's own errors);
// 3 inconclusive, with `gpuvet run --acceptance` only (docs/acceptance.md).
const (
	exitOK        = 0
	exitFailed    = 1
	exitBadUsage  = 2
	exitUndecided = judge.ExitUndecided // --acceptance only: the run could not decide
)

// newRoot builds the command tree afresh for each execution, so flags set by one never leak into
// the next.
func newRoot() *cobra.Command {
	r := &cobra.Command{
		Use:           "gpuvet",
		Short:         "Vet GPU machines for LLM inference: health, real serving, calibrated load, verdicts, report",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	r.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &exitError{code: exitBadUsage, err: withFlagHint(cmd, err)}
	})
	r.AddCommand(newRunCmd(), newHealthCmd(), newBenchCmd(), newSimCmd(), newCompareCmd(), newCalibrateCmd(),
		newReportCmd(), newCacheCmd(), newConfigCmd(), newProbeCmd(), newCleanCmd(), newInPodCmd(), newHistoryCmd())
	return r
}

// phased is a command's options: Complete -> Validate -> Run (kubectl's pattern), run by phases.
type phased interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(cmd *cobra.Command) error
}

func phases(o phased) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd)
	}
}

// exitError carries an exit code through cobra's RunE.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks bad input: exit 2, before anything starts.
func usageErr(format string, args ...any) error {
	return &exitError{code: exitBadUsage, err: fmt.Errorf(format, args...)}
}

// failedErr marks a run that completed but must exit 1 (a failure, or a flag under --fail-on-flag).
func failedErr(format string, args ...any) error {
	return &exitError{code: exitFailed, err: fmt.Errorf(format, args...)}
}

// interruptible is parent, cancelled by Ctrl-C or SIGTERM until stop.
func interruptible(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// renamedFlags are flags one command spells as another did: edit distance would point elsewhere
// (run's --sim-count is nearest to --gpu-count, a real-GPU flag).
var renamedFlags = map[string]string{"sim-count": "sim-gpus"}

// withFlagHint adds "did you mean --x?" to an unknown-flag error, as kubectl does for commands.
func withFlagHint(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	if to, ok := renamedFlags[name]; ok && cmd.Flags().Lookup(to) != nil {
		return fmt.Errorf("%w\n\nDid you mean this?\n\t--%s", err, to)
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if near, ok := nearestFlag(name, names); ok {
		return fmt.Errorf("%w\n\nDid you mean this?\n\t--%s", err, near)
	}
	return err
}

// nearestFlag is the flag an unknown one most likely meant: within its family (--sim-…) by
// spelling, then by shared words (--sim-gpu-count: --sim-gpus, not the nearer --gpu-count); then
// among all flags.
func nearestFlag(name string, names []string) (string, bool) {
	family, _, ok := strings.Cut(name, "-")
	if ok {
		var kin []string
		for _, n := range names {
			if strings.HasPrefix(n, family+"-") {
				kin = append(kin, n)
			}
		}
		if near, ok := config.Closest(name, kin); ok {
			return near, true
		}
		if near, ok := sharesMostWords(name, kin); ok {
			return near, true
		}
	}
	return config.Closest(name, names)
}

// sharesMostWords is the candidate sharing the most words with name beyond the first (plurals
// alike, counting twice where name asks for a count: --sim-gpu-count means --sim-gpus, not
// --sim-gpu); ties go to the nearer spelling.
func sharesMostWords(name string, candidates []string) (string, bool) {
	stem := func(w string) string { return strings.TrimSuffix(w, "s") }
	words := map[string]bool{}
	for _, w := range strings.Split(name, "-")[1:] {
		words[stem(w)] = true
	}
	count := words["count"] || words["num"] || words["number"]
	best, bestN := "", 0
	for _, c := range candidates {
		n := 0
		for _, w := range strings.Split(c, "-")[1:] {
			if words[stem(w)] {
				n++
				if count && w != stem(w) {
					n++
				}
			}
		}
		if n > bestN || (n == bestN && n > 0 && config.EditDistance(name, c) < config.EditDistance(name, best)) {
			best, bestN = c, n
		}
	}
	return best, bestN > 0
}

func main() {
	stop := startProfile()
	code := execute(os.Args[1:])
	stop()
	os.Exit(code)
}

// execute runs the CLI with args and returns the process exit code (tests call it directly).
func execute(args []string) int { return executeTo(args, nil, nil) }

// executeTo is execute with the commands' output to stdout and stderr (nil: the process's own).
func executeTo(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	if stdout != nil {
		root.SetOut(stdout)
	}
	if stderr != nil {
		root.SetErr(stderr)
	}
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	// Every error goes through the one URL redaction (a URL's password, a ?api_key= from any layer).
	msg := results.RedactURLs(err.Error())
	if len(msg) > 4096 { // a value given whole (a 100 KB --model): each quoted one cut to its start
		msg = config.ClipQuoted(msg)
	}
	fmt.Fprintln(root.ErrOrStderr(), "gpuvet:", msg)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Cobra's own argument errors (unknown command, wrong arg count) are usage errors.
	return exitBadUsage
}
