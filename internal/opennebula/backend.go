package opennebula

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// Backend opennebula as the registry names it: how `gpuvet run` opens it and how `gpuvet clean`
// removes what its killed runs left.

// Flags adds backend opennebula's `gpuvet run` flags (the backend table maps each to its key).
func Flags(fl *pflag.FlagSet) {
	fl.String("endpoint", "", "backend opennebula: the XML-RPC URL, e.g. http://frontend:2633/RPC2 (credentials: $ONE_AUTH)")
}

// Open reads the credentials and opens the front-end's client (errors: bad input, before anything
// is created); close closes the client.
func Open(plan *config.Plan) (fleet.Backend, func(), error) {
	c := plan.Config
	auth, err := Credentials(c.OpenNebula.AuthEnv)
	if err != nil {
		return nil, nil, err
	}
	client, err := NewClient(plan.OpenNebulaEndpoint, auth)
	if err != nil {
		return nil, nil, err
	}
	return &Fleet{Config: c.OpenNebula, SSH: c.SSH, Client: client, Env: ssh.SecretsFromEnv(), Plan: plan}, func() { client.Close() }, nil
}

// Cleaner removes every object an opennebula run's manifest still lists: the run folders in the
// VMs first (their partial results are collected), then the VMs and what host preparation changed
// on the nodes; a folder that could not be reached is gone with its VM.
var Cleaner = fleet.ObjectCleaner(Removers)

// removeTimeout bounds one VM's removal by `gpuvet clean` (which has no deadline of its own) as a
// run's cleanup is bounded (Fleet.CleanupTimeout): a front-end that never answers cannot hold it.
var removeTimeout = func(c config.OpenNebula) time.Duration {
	return (&Fleet{Config: c}).CleanupTimeout()
}

// Removers are ssh's and the VM's.
func Removers() fleet.Removers {
	rs := ssh.Removers()
	rs.ByKind[ObjectKind] = removeVM
	rs.Holders = append(rs.Holders, ObjectKind)
	return rs
}

func removeVM(ctx context.Context, plan *config.Plan, m *fleet.Manifest, o fleet.Object, _ func(string)) error {
	c := plan.Config.OpenNebula
	ctx, cancel := context.WithTimeout(ctx, removeTimeout(c))
	defer cancel()
	// The credentials go only to the front-end the config names: a manifest naming another is
	// refused (it could be anyone's).
	if c.Endpoint == "" || c.Endpoint != o.Host {
		return fmt.Errorf("the manifest names OpenNebula front-end %s; $%s is sent only to the front-end the config names (now %q): confirm it with --set opennebula.endpoint=%s (or GPUVET_OPENNEBULA_ENDPOINT)",
			o.Host, c.AuthEnv, c.Endpoint, o.Host)
	}
	if !strings.HasPrefix(o.Name, "gpuvet-"+m.RunID+"-") {
		return fmt.Errorf("VM name %q does not carry run %s (gpuvet-%s-…): not gpuvet's, left alone", o.Name, m.RunID, m.RunID)
	}
	auth, err := Credentials(c.AuthEnv)
	if err != nil {
		return err
	}
	client, err := NewClient(plan.OpenNebulaEndpoint, auth)
	if err != nil {
		return err
	}
	defer client.Close()
	return Clean(ctx, client, o, WaitsFrom(c))
}
