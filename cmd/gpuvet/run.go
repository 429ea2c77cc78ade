package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// planFlags are the named flags of `gpuvet run` that set config keys; `gpuvet config show` takes
// them too, so it shows exactly the plan a run would use.
type planFlags struct {
	sim     bool
	backend string
}

func (f *planFlags) register(cmd *cobra.Command) {
	sd := results.DefaultSim()
	fl := cmd.Flags()
	fl.BoolVar(&f.sim, "sim", false, "run everything on the simulator's virtual GPUs (backend sim; shorter load defaults, each kept until you set that key)")
	fl.StringVar(&f.backend, "backend", "local", backendkind.Help())
	fl.String("url", "", "backend endpoint: the server's base URL, e.g. http://127.0.0.1:8000")
	fl.String("api-key-env", "", "backend endpoint: the environment variable holding the API key")
	fl.String("model", "", "model id(s) to serve, comma-separated (replaces models)")
	fl.String("out", "out", "output directory")
	fl.String("parallel-gpus", "auto", "GPUs loaded at once, each with its own engine and load worker: auto (as many as gpuvet's free CPU carries) or N (1: one at a time)")
	fl.Int("gpu-count", 0, "vet only the first N GPUs (0: all)")
	fl.String("fail-in", "", "inject a failure in one phase (discover, health, serve, warmup, load, functional, judge, write) to prove cleanup and reporting")
	fl.Bool("fail-on-flag", false, "exit 1 when anything is flagged")
	fl.Bool("fail-on-inconclusive", false, "exit 1 when the run is inconclusive (a gate or comparison could not decide: too few samples, client-limited, a lower bound, a cut rung)")
	fl.Bool("acceptance", false, "the gate's exit codes (docs/acceptance.md): 0 only when ok, 1 flag or failed, 3 inconclusive (undecided: run again); 2 stays bad input")
	fl.Bool("save-baseline", false, "also write OUT/baseline.json (this run as the bare-metal reference)")
	fl.String("baseline", "", "compare against this baseline.json (overhead % per metric)")
	fl.String("engine", "vllm", "engine: "+strings.Join(enginekind.Names(), ", ")+" (generic with --engine-cmd)")
	fl.String("engine-cmd", "", "launch template: {model} {port} {gpu} {tp} {max_model_len} {gpu_memory_utilization} {front}")
	fl.String("sim-gpu", sd.GPU, "simulated GPU model (catalog key)")
	fl.Int("sim-gpus", sd.GPUs, "number of simulated GPUs")
	fl.Int("sim-straggler", -1, "index of a simulated GPU that runs slower (-1: none)")
	fl.String("sim-link-fault", "", "NVLink fault on a simulated GPU: GPU[:down|slow|errors] (e.g. 1:slow)")
	fl.String("sim-cotenant", "", "another process on a simulated GPU for part of the run: GPU[:FROM[-TO]] (e.g. 1, or 1:5s-20s)")
	fl.String("sim-corrupt", "", "a simulated GPU that computes wrong answers: its burn and GEMM results mismatch and its greedy outputs drift (GPU index)")
	fl.String("sim-throttle", "", "slow a simulated GPU with a clock-event reason while loaded: GPU[:REASON[:FROM[-TO]]] (e.g. 2, or 2:hw_power_brake_slowdown:20s)")
	fl.String("sim-engine-fault", "", "a simulated GPU whose engine misbehaves (the GPU stays healthy): GPU:KIND, KIND short (short outputs despite ignore_eos), cut (streams cut without a finish reason), traceback (HTTP 500 with a Python traceback), exit, or hub (cannot fetch its model from the hub, exits before ready) (e.g. 1:short)")
	fl.String("sim-recovery-action", "", "a simulated GPU whose driver asks for recovery (NVML's GPU recovery action): GPU:ACTION, ACTION reset, reboot, drain-p2p or drain-and-reset (e.g. 3:reset)")
	fl.String("sim-driver-fault", "", "play one of the driver's signals on a simulated GPU: GPU:KIND, KIND remap-pending, remap-failure, fabric, fallen-off-bus, requires-reset, rm-init or gsp-timeout (e.g. 1:fallen-off-bus)")
	fl.Bool("allow-busy", false, "measure a GPU another process uses (or that is not idle) and note it, instead of flagging it")
	fl.String("nccl-lib", "", "libnccl.so.2 for the health phase's all-reduce (default: the library path, then Python environments)")
	registerRemoteFlags(fl)
}

// hostFlagPaths maps run's flags of no backend to the config keys they set (flagPaths).
var hostFlagPaths = map[string]string{
	"backend": "backend", "model": "models",
	"out": "output.dir", "parallel-gpus": "run.parallel_gpus", "gpu-count": "run.gpu_count",
	"fail-in": "run.fail_in", "fail-on-flag": "run.fail_on_flag", "save-baseline": "run.save_baseline",
	"fail-on-inconclusive": "run.fail_on_inconclusive", "acceptance": "run.acceptance",
	"baseline": "run.baseline", "engine": "engine.kind", "engine-cmd": "engine.command",
	"nccl-lib": "health.nccl_lib", "allow-busy": "health.allow_busy",
}

// configFlags returns the keys the flags given set (flags left out leave files, environment and
// defaults to decide).
func (f *planFlags) configFlags(cmd *cobra.Command) ([]config.Flag, error) {
	var set []config.Flag
	if f.sim {
		switch kind := backendkind.Of(f.backend); {
		case cmd.Flags().Changed("backend") && kind.SimKey != "": // e.g. slurm: each node's job runs the simulator
			set = append(set, config.Flag{Name: "--sim", Path: kind.SimKey, Value: "sim"})
		case cmd.Flags().Changed("backend") && !kind.Simulated:
			return nil, usageErr("--sim and --backend %s exclude each other (with --backend slurm it runs the simulator in each node's job)", f.backend)
		default:
			set = append(set, config.Flag{Name: "--sim", Path: "backend", Value: "sim"})
		}
	}
	cmd.Flags().Visit(func(fl *pflag.Flag) { // changed flags only, in name order
		for _, path := range flagPaths(fl.Name) {
			set = append(set, config.Flag{Name: "--" + fl.Name, Path: path, Value: fl.Value.String()})
		}
	})
	return set, nil
}

// planOptions are the flags of a command that resolves a plan as `gpuvet run` does.
type planOptions struct {
	cf   configFlags
	pf   planFlags
	plan *config.Plan
}

// runOptions are `gpuvet run`'s flags.
type runOptions struct {
	planOptions
	force bool
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Vet this host: health, a real engine per GPU, calibrated load, API suite, verdicts, report",
		Long: `Runs the whole validation on one host: discover GPUs -> health -> for each model and GPU (or tp
group): serve -> warm-up -> load with power sampling -> functional API suite -> judge -> write.

Results go to --out (default out/): summary.json (rewritten as each GPU finishes, complete=false
and status incomplete until the end, so a killed run keeps what it measured), raw load per GPU
under raw/, engine logs under logs/, report.html, junit.xml and ctrf.json (CTRF, beside JUnit); baseline.json with --save-baseline.
A run locks its --out folder, and refuses one holding an earlier run's results unless --force
(which removes them first, so no stale file mixes with the new ones).

  gpuvet run --sim                         the whole run on 4 simulated H200s (no GPU needed)
  gpuvet run -c site.yaml                  vLLM on every GPU of this host
  gpuvet run --backend endpoint --url http://127.0.0.1:8000 --model Qwen/Qwen3-8B

Configuration: -c FILE (repeatable; aicr recipes too), --set key=value, GPUVET_<KEY> variables;
see 'gpuvet config show' (same flags) and docs/config.md. Exit code: 0 ok (or flags without
--fail-on-flag, or inconclusive without --fail-on-inconclusive), 1 a failure, an interrupted run, a
flag with --fail-on-flag, or an inconclusive run with --fail-on-inconclusive, 2 bad input found
before anything started (configuration, an unknown --sim-gpu or --model, an unwritable or busy
--out, no NVIDIA driver for a local run, an endpoint that does not answer or list the model).
With --acceptance (run.acceptance, for gates: docs/acceptance.md): 0 only when the run is ok, 1 flag,
failed or a run that did not finish, 3 inconclusive (undecided: run it again), 2 bad input.`,
		Args: cobra.NoArgs,
		RunE: phases(&o),
	}
	o.cf.register(cmd)
	o.pf.register(cmd)
	cmd.Flags().BoolVar(&o.force, "force", false, "replace the results of an earlier run in --out (refused without it)")
	return cmd
}

// Complete resolves the plan: files, GPUVET_* variables, --set and the flags given.
func (o *planOptions) Complete(cmd *cobra.Command, _ []string) error {
	set, err := o.pf.configFlags(cmd)
	if err != nil {
		return err
	}
	o.plan, err = o.cf.plan(set...)
	return err
}

// Validate checks what the plan needs before anything starts (pipeline.Preflight): bad input is
// exit 2, nothing written.
func (o *runOptions) Validate() error {
	useEndpointURLKey(o.plan) // before the preflight, which asks the endpoint with that key
	if err := pipeline.Preflight(o.plan, catalog.Builtin()); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// Run runs the plan; on Ctrl-C/SIGTERM engines are stopped and summary.json keeps what was
// measured. A fleet backend runs through fleet.Execute (remote.go).
func (o *runOptions) Run(cmd *cobra.Command) error {
	plan := o.plan
	lock, left, err := pipeline.LockOutput(plan.Config.Output.Dir, o.force)
	if err != nil {
		return usageErr("%v", err)
	}
	defer lock.Release()
	if len(left) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "--force: left in %s what the earlier run did not write: %s\n", plan.Config.Output.Dir, strings.Join(left, ", "))
	}
	if backendkind.Of(plan.Config.Backend).Fleet { // many hosts or nodes, one summary
		return runRemotePlan(cmd, plan)
	}
	ctx, stop := interruptible(context.Background())
	defer stop()
	defer engine.StopAll(10 * time.Second)
	defer softMemoryLimit(planStreams(plan.Config))()
	stderr := cmd.ErrOrStderr()
	reapLeftovers(plan.Config.Output.Dir, stderr)
	res, err := pipeline.Run(ctx, plan, pipeline.NewDeps(plan.Config, catalog.Builtin(), stderr), pipeline.Options{
		ToolVersion: version(), Progress: stderr, Live: term.IsTerminal(stderr),
	})
	if err != nil {
		return failedErr("%v", err)
	}
	term.Summary(cmd.OutOrStdout(), res.Summary)
	term.History(cmd.OutOrStdout(), res.Summary.History)
	fmt.Fprintln(cmd.OutOrStdout(), "\n"+pipeline.Describe(res))
	if ctx.Err() != nil {
		return failedErr("interrupted: partial results in %s", res.SummaryPath)
	}
	if res.ExitCode != exitOK { // not interrupted: that returned above
		if res.ExitCode == judge.ExitUndecided && plan.Config.Run.Acceptance {
			return &exitError{code: exitUndecided, err: fmt.Errorf("run status %s: undecided, not accepted (see %s for what would decide it)", res.Summary.Status, res.SummaryPath)}
		}
		if h := res.Summary.History; h != nil && h.Recorded == nil && h.Error != "" {
			// The verdicts may be ok: what failed is the record of them (the README's exit 1).
			return failedErr("run status %s, but the run was not recorded in the history: %s (see %s)", res.Summary.Status, h.Error, res.SummaryPath)
		}
		return failedErr("run status %s (see %s)", res.Summary.Status, res.SummaryPath)
	}
	return nil
}

// flagPaths are the config keys a plan flag sets: a flag of no backend's, or a backend's from the
// backend table; a flag several backends read (--dry-run) sets each one's key.
func flagPaths(flag string) []string {
	if p, ok := hostFlagPaths[flag]; ok {
		return []string{p}
	}
	return backendkind.FlagKeys(flag)
}
