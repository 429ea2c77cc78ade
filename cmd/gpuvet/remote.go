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

// The multi-host backends (ssh, opennebula, kubernetes): each opens a fleet.Backend for
// fleet.Execute, which owns the whole run, and has a cleaner for what its killed runs left.

// fleetBackend is one multi-host backend: how `gpuvet run` opens it (an error is bad input, exit
// 2; close releases what open took) and how `gpuvet clean` removes its leftovers.
type fleetBackend struct {
	open  func(plan *config.Plan) (b fleet.Backend, close func(), err error)
	clean cleaner
}

// fleetBackends is the one table of multi-host backends: `gpuvet run --backend NAME` and
// `gpuvet clean` both read it.
var fleetBackends = map[string]fleetBackend{
	"ssh":        {open: openSSH, clean: cleanObjects},
	"opennebula": {open: openOpenNebula, clean: cleanObjects},
	"kubernetes": {open: openKubernetes, clean: cleanKubernetes},
	"slurm":      {open: openSlurm, clean: cleanSlurm},
}

// fleetFlagPaths are the multi-host backends' `gpuvet run` flags and the config keys they set.
var fleetFlagPaths = map[string]string{"hosts": "ssh.hosts", "inventory": "ssh.inventory", "endpoint": "opennebula.endpoint"}

// registerRemoteFlags adds the multi-host backends' flags to a command that resolves a plan
// (run, config show).
func registerRemoteFlags(fl *pflag.FlagSet) {
	fl.String("hosts", "", "backend ssh: the hosts to vet, comma-separated (ssh_config aliases, names or addresses)")
	fl.String("inventory", "", "backend ssh: a YAML inventory of hosts (per-host user, port, identity_file, gpus, set)")
	fl.String("endpoint", "", "backend opennebula: the XML-RPC URL, e.g. http://frontend:2633/RPC2 (credentials: $ONE_AUTH)")
	registerKubeFlags(fl)
	registerSlurmFlags(fl)
}

func isRemoteBackend(b string) bool { _, ok := fleetBackends[b]; return ok }

func openSSH(plan *config.Plan) (fleet.Backend, func(), error) {
	return ssh.Fleet{Config: plan.Config.SSH, Env: ssh.SecretsFromEnv(), Prep: hostprep.FromConfig(plan.Config)}, func() {}, nil
}

func openOpenNebula(plan *config.Plan) (fleet.Backend, func(), error) {
	c := plan.Config
	auth, err := opennebula.Credentials(c.OpenNebula.AuthEnv)
	if err != nil {
		return nil, nil, err
	}
	client, err := opennebula.NewClient(plan.OpenNebulaEndpoint, auth)
	if err != nil {
		return nil, nil, err
	}
	return &opennebula.Fleet{Config: c.OpenNebula, SSH: c.SSH, Client: client, Env: ssh.SecretsFromEnv(), Plan: plan}, func() { client.Close() }, nil
}

// runRemotePlan runs a fleet plan through fleet.Execute, with the backend the table names.
func runRemotePlan(cmd *cobra.Command, plan *config.Plan) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, closeBackend, err := fleetBackends[plan.Config.Backend].open(plan)
	if err != nil {
		return usageErr("%v", err)
	}
	defer closeBackend()
	err = fleet.Execute(ctx, plan, b, fleet.ExecOptions{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), ToolVersion: version()})
	var input *fleet.InputError
	var status *fleet.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &input):
		return usageErr("%v", err)
	case errors.As(err, &status):
		return &exitError{code: status.Code, err: err}
	}
	return failedErr("%v", err)
}
