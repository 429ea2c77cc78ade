package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/opennebula"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// The ssh and opennebula backends: many hosts (or VMs), each running `gpuvet run` over SSH.
func init() {
	flagPaths["hosts"] = "ssh.hosts"
	flagPaths["inventory"] = "ssh.inventory"
	flagPaths["endpoint"] = "opennebula.endpoint"
}

func registerRemoteFlags(fl *pflag.FlagSet) {
	fl.String("hosts", "", "backend ssh: the hosts to vet, comma-separated (ssh_config aliases, names or addresses)")
	fl.String("inventory", "", "backend ssh: a YAML inventory of hosts (per-host user, port, identity_file, gpus, set)")
	fl.String("endpoint", "", "backend opennebula: the XML-RPC URL, e.g. http://frontend:2633/RPC2 (credentials: $ONE_AUTH)")
}

func isRemoteBackend(b string) bool { return b == "ssh" || b == "opennebula" }

// runRemotePlan runs a fleet plan: hosts (or VMs) in parallel, one merged summary and report.
func runRemotePlan(cmd *cobra.Command, plan *config.Plan) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := plan.Config
	stderr := cmd.ErrOrStderr()
	start := time.Now().UTC()
	runID := start.Format("20060102T150405Z")
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), line)
	}
	yml, err := plan.RemoteYAML()
	if err != nil {
		return usageErr("plan: %v", err)
	}
	if err := os.MkdirAll(c.Output.Dir, 0o755); err != nil {
		return usageErr("output.dir %s: %v", c.Output.Dir, err)
	}
	state, err := fleet.StateDir()
	if err != nil {
		return usageErr("%v", err)
	}
	m, err := fleet.NewManifest(state, c.Backend, runID, map[string]string{"output": c.Output.Dir})
	if err != nil {
		return usageErr("%v", err)
	}
	var hosts []fleet.Host
	var skipped []results.SkippedHost
	var finish func(*results.Summary)
	parallel := c.SSH.Parallel
	switch c.Backend {
	case "ssh":
		hs, err := ssh.Fleet{Config: c.SSH, Plan: yml, RunID: runID, Out: c.Output.Dir, Manifest: m, Progress: say}.Hosts()
		if err != nil {
			_ = m.Finish()
			return usageErr("%v", err)
		}
		for _, h := range hs {
			hosts = append(hosts, h)
		}
	case "opennebula":
		parallel = c.OpenNebula.Parallel
		auth, err := opennebula.Credentials(c.OpenNebula.AuthEnv)
		if err != nil {
			_ = m.Finish()
			return usageErr("%v", err)
		}
		client, err := opennebula.NewClient(c.OpenNebula.Endpoint, auth)
		if err != nil {
			_ = m.Finish()
			return usageErr("%v", err)
		}
		defer client.Close()
		vms, sk, err := opennebula.Fleet{Config: c.OpenNebula, SSH: c.SSH, Plan: yml, RunID: runID, Out: c.Output.Dir, Manifest: m, Progress: say}.Hosts(ctx, client)
		if err != nil {
			_ = m.Finish()
			return usageErr("opennebula %s: %v", c.OpenNebula.Endpoint, err)
		}
		skipped = sk
		for _, h := range vms {
			hosts = append(hosts, h)
		}
		finish = func(s *results.Summary) { opennebula.Finish(s, vms) }
	}
	say(fmt.Sprintf("run %s: backend %s, %d host(s), %d at once, manifest %s", runID, c.Backend, len(hosts), parallel, m.Path()))
	for _, sk := range skipped {
		say(fmt.Sprintf("skipped %s: %s", sk.Name, sk.Reason))
	}
	outs := fleet.Run(ctx, hosts, fleet.Options{Parallel: parallel, Progress: func(f string, a ...any) { say(fmt.Sprintf(f, a...)) }})
	s := fleet.Merge(fleetBase(plan, runID, start), outs, skipped, parallel)
	if finish != nil {
		finish(s)
	}
	return finishFleet(ctx, cmd, plan, s, m)
}

// fleetBase is the merged summary's identity: the run, the tool, the plan's meta.
func fleetBase(plan *config.Plan, runID string, start time.Time) *results.Summary {
	c := plan.Config
	env := c.Environment
	if c.Backend == "opennebula" && plan.Source("environment") == "default" {
		env = "vm"
	}
	lc := c.LoadConfig()
	return &results.Summary{SchemaVersion: results.SchemaVersion, Tool: results.Tool{Name: "gpuvet", Version: version()},
		RunID: runID, StartedAt: start, Backend: c.Backend, Environment: env, Status: results.StatusOK,
		Meta: results.Meta{Models: c.Models, LoadProfile: &lc, Thresholds: config.Thresholds(c, plan.Sources), Settings: plan.Settings()}}
}

// finishFleet judges the merged summary (node to node, gates, baseline), writes it and the
// reports, closes the manifest (loudly when something is left) and sets the exit code.
func finishFleet(ctx context.Context, cmd *cobra.Command, plan *config.Plan, s *results.Summary, m *fleet.Manifest) error {
	c := plan.Config
	jc := judge.FromPlan(plan, nil)
	fleet.CompareNodes(s, jc.LLMGuardsFrom(), jc.GEMMGuardsFrom())
	if err := judge.Judge(s, plan); err != nil {
		s.Error = "judge: " + err.Error()
		s.Status = results.StatusFailed
	}
	if c.Run.Baseline != "" {
		_ = pipeline.BaselineFromFile(s, c.Run.Baseline, plan)
	}
	if err := m.Finish(); err != nil {
		s.Caveats = append(s.Caveats, "LEFTOVERS: "+err.Error())
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuvet: WARNING: "+err.Error())
	}
	s.FinishedAt = time.Now().UTC()
	if ctx.Err() != nil {
		s.Error = joinNonEmpty(s.Error, "interrupted: results are partial")
		s.Status = results.StatusFailed
	} else {
		s.Complete = true
	}
	path := filepath.Join(c.Output.Dir, "summary.json")
	if err := results.WriteJSON(path, s); err != nil {
		return failedErr("write %s: %v", path, err)
	}
	if c.Run.SaveBaseline && s.Complete {
		_ = results.WriteJSON(filepath.Join(c.Output.Dir, "baseline.json"), s)
	}
	if err := pipeline.WriteReports(s, c.Output.Dir, c.Output); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuvet: report:", err)
	}
	out := cmd.OutOrStdout()
	pipeline.Render(out, s)
	renderFleet(out, s)
	fmt.Fprintf(out, "\nstatus %s: %d host(s); summary %s\n", s.Status, len(s.Hosts), path)
	if ctx.Err() != nil {
		return failedErr("interrupted: partial results in %s", path)
	}
	if judge.ExitCode(s, c.Run.FailOnFlag, c.Run.FailOnInconclusive) != exitOK {
		return failedErr("run status %s (see %s)", s.Status, path)
	}
	return nil
}

// renderFleet prints one line per host, the skipped ones, and the node-to-node flags.
func renderFleet(w io.Writer, s *results.Summary) {
	fmt.Fprintln(w)
	for _, h := range s.Hosts {
		line := fmt.Sprintf("host %-20s %s", h.Name, h.Status)
		if h.Error != "" {
			line += ": " + h.Error
		}
		for _, v := range h.VMs {
			line += fmt.Sprintf(" [VM %d gpus %v provisioned in %.1fs, terminated %v]", v.ID, v.GPUs, v.ProvisionS, v.Terminated)
		}
		fmt.Fprintln(w, line)
		for _, f := range h.Flags {
			fmt.Fprintf(w, "  flag %s: %s\n", f.Check, f.Reason)
		}
	}
	if s.Fleet != nil {
		for _, sk := range s.Fleet.Skipped {
			fmt.Fprintf(w, "host %-20s skipped: %s\n", sk.Name, sk.Reason)
		}
	}
	for _, c := range s.Caveats {
		fmt.Fprintln(w, "caveat:", c)
	}
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
