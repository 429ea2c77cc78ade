package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/opennebula"
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

// runRemotePlan runs a fleet plan through fleet.Execute, with the backend it names.
func runRemotePlan(cmd *cobra.Command, plan *config.Plan) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := plan.Config
	var b fleet.Backend
	switch c.Backend {
	case "ssh":
		b = ssh.Fleet{Config: c.SSH, Env: ssh.SecretsFromEnv(), Prep: hostprep.FromConfig(c)}
	case "opennebula":
		auth, err := opennebula.Credentials(c.OpenNebula.AuthEnv)
		if err != nil {
			return usageErr("%v", err)
		}
		client, err := opennebula.NewClient(plan.OpenNebulaEndpoint, auth)
		if err != nil {
			return usageErr("%v", err)
		}
		defer client.Close()
		b = &opennebula.Fleet{Config: c.OpenNebula, SSH: c.SSH, Client: client, Env: ssh.SecretsFromEnv(), Plan: plan}
	}
	err := fleet.Execute(ctx, plan, b, fleet.ExecOptions{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), ToolVersion: version()})
	var input *fleet.InputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &input):
		return usageErr("%v", err)
	}
	return failedErr("%v", err)
}
