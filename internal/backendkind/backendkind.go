// Package backendkind is the one table of what a backend is: a fleet of hosts or nodes (each
// running its own part, through fleet.Execute) or this one host; whether its GPUs are the
// simulator's; whether it launches the plan's engines; whether it finds GPUs of its own; the
// environment a run on it records; the config section it reads; and the `gpuvet run` flags that set
// its keys. config's validation, the host pipeline, the summary and the CLI read its fields
// instead of comparing backend names. It imports nothing, so every layer may read it. Adding a
// backend is one row here, one package that opens and cleans it, and one registry line
// (docs/architecture.md, "How to add a backend").
package backendkind

import (
	"cmp"
	"strings"
)

// Kind is one backend.
type Kind struct {
	Name string
	// Help is its words in --backend's help ("": the name alone).
	Help string
	// Fleet: many hosts or nodes, each running its own part of the plan, merged into one summary
	// by fleet.Execute; false: this process runs the plan on one host (pipeline.Run).
	Fleet bool
	// Simulated: its GPUs are the simulator's virtual ones (its plan gets the simulator's short
	// defaults, the catalog knows its GPU and models).
	Simulated bool
	// Engines: it launches the plan's engine itself (here or in its pods), so engine.kind and
	// engine.command are checked against it; false: a simulated engine, a server already running,
	// or hosts whose own run checks the plan.
	Engines bool
	// DiscoversGPUs: it finds the GPUs it vets; false: it is given a server (endpoint), whose GPUs
	// it sees only when told where (endpoint.health).
	DiscoversGPUs bool
	// ThisHost: it measures this machine's own GPUs (the driver, the model cache, NUMA binding and
	// the preflight of this host apply).
	ThisHost bool
	// Remote: a fleet's host (ssh.remote_backend, slurm.remote_backend) may run it.
	Remote bool
	// Environment is what a run records when the environment key is left at its default ("": the
	// key's default, baremetal).
	Environment string
	// Section is the config section of its own settings ("": none).
	Section string
	// RemoteKey is the key naming the backend each of its hosts runs ("": it has no hosts of its own).
	RemoteKey string
	// SimKey is the key --sim sets to sim when this backend is named ("": --sim excludes it).
	SimKey string
	// FindsByLabel: `gpuvet clean` finds its runs' leftovers by the run label, without a manifest,
	// so plain `gpuvet clean` asks it too when one of ConnectKeys is set (or with --untaint).
	FindsByLabel bool
	ConnectKeys  []string
	// Untaint: `gpuvet clean --untaint` lifts the taints its runs put on nodes.
	Untaint bool
	// Flags are its `gpuvet run` flags and the keys they set (a flag several rows name sets each
	// row's key: one --dry-run for every backend that has one).
	Flags []Flag
}

// Flag is a command-line flag and the config key it sets.
type Flag struct {
	Name string // without --
	Key  string
}

// Kinds is the table, in the order help texts list them.
var Kinds = []Kind{
	{
		Name: "local", Help: "local (engines on this host)",
		Engines: true, DiscoversGPUs: true, ThisHost: true, Remote: true,
	},
	{
		Name: "endpoint", Help: "endpoint (an already-running server)",
		Section: "endpoint",
		Flags:   []Flag{{"url", "endpoint.url"}, {"api-key-env", "endpoint.api_key_env"}},
	},
	{
		Name: "sim", Simulated: true, DiscoversGPUs: true, Remote: true, Section: "sim",
		Flags: []Flag{
			{"sim-gpu", "sim.gpu"}, {"sim-gpus", "sim.gpus"}, {"sim-straggler", "sim.straggler"},
			{"sim-link-fault", "sim.link_fault"}, {"sim-cotenant", "sim.cotenant"}, {"sim-corrupt", "sim.corrupt"},
			{"sim-throttle", "sim.throttle"}, {"sim-engine-fault", "sim.engine_fault"},
			{"sim-recovery-action", "sim.recovery_action"}, {"sim-driver-fault", "sim.driver_fault"},
		},
	},
	{
		Name: "kubernetes", Help: "kubernetes (a cluster's GPU nodes)",
		Fleet: true, Engines: true, DiscoversGPUs: true, Environment: "k8s", Section: "kubernetes",
		FindsByLabel: true, ConnectKeys: []string{"kubernetes.kubeconfig", "kubernetes.context"}, Untaint: true,
		Flags: []Flag{
			{"kubeconfig", "kubernetes.kubeconfig"}, {"context", "kubernetes.context"}, {"node-selector", "kubernetes.node_selector"},
			{"tolerations", "kubernetes.tolerations"}, {"nodes", "kubernetes.nodes"}, {"parallel-nodes", "kubernetes.parallel_nodes"},
			{"image", "kubernetes.image"}, {"engine-image", "kubernetes.engine_image"}, {"cache-size", "model_cache.size"},
			{"cache-access-mode", "model_cache.access_mode"}, {"storage-class", "kubernetes.storage_class"},
			{"health-args", "kubernetes.health_args"}, {"keep-on-failure", "kubernetes.keep_on_failure"},
			{"job-timeout", "kubernetes.job_timeout"}, {"start-grace", "kubernetes.start_grace"}, {"dynamo", "kubernetes.dynamo"},
			{"hub-endpoint", "model_cache.endpoint"}, {"cache-owner-init", "kubernetes.cache_owner_init"},
			{"cache-namespace", "kubernetes.cache_namespace"}, {"dynamo-target", "kubernetes.dynamo_target"},
			{"label-nodes", "kubernetes.label_nodes"}, {"taint-failed", "kubernetes.taint_failed"}, {"taint-flagged", "kubernetes.taint_flagged"},
			{"gate", "kubernetes.gate"}, {"pending-retries", "kubernetes.pending_retries"}, {"only-due", "kubernetes.only_due"},
			{"verdict-valid-for", "kubernetes.verdict_valid_for"}, {"max-unhealthy", "kubernetes.max_unhealthy"},
			{"priority-class", "kubernetes.priority_class"}, {"dry-run", "kubernetes.dry_run"},
		},
	},
	{
		Name: "ssh", Help: "ssh (--hosts/--inventory)",
		Fleet: true, DiscoversGPUs: true, Section: "ssh", RemoteKey: "ssh.remote_backend",
		Flags: []Flag{{"hosts", "ssh.hosts"}, {"inventory", "ssh.inventory"}},
	},
	{
		Name: "opennebula", Help: "opennebula (--endpoint)",
		Fleet: true, DiscoversGPUs: true, Environment: "vm", Section: "opennebula", RemoteKey: "ssh.remote_backend",
		Flags: []Flag{{"endpoint", "opennebula.endpoint"}},
	},
	{
		Name: "slurm", Help: "slurm (a Slurm cluster's GPU nodes, one job each)",
		Fleet: true, DiscoversGPUs: true, Section: "slurm", RemoteKey: "slurm.remote_backend", SimKey: "slurm.remote_backend",
		Flags: []Flag{
			{"partition", "slurm.partition"}, {"slurm-nodes", "slurm.nodes"}, {"reservation", "slurm.reservation"},
			{"drain-failed", "slurm.drain_failed"}, {"drain-flagged", "slurm.drain_flagged"}, {"max-drain", "slurm.max_drain"}, {"dry-run", "slurm.dry_run"},
		},
	},
}

// Get returns the kind named name; ok is false for a name the table lacks (its zero Kind then
// claims nothing).
func Get(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{Name: name}, false
}

// Of returns the kind named name (its zero Kind, with the name, when the table lacks it: config's
// validation refuses such a name before anything reads it).
func Of(name string) Kind {
	k, _ := Get(name)
	return k
}

// Names lists the backends' names in the table's order.
func Names() []string {
	return names(func(Kind) bool { return true })
}

// RemoteNames lists the backends a fleet's host may run.
func RemoteNames() []string {
	return names(func(k Kind) bool { return k.Remote })
}

func names(keep func(Kind) bool) []string {
	var ns []string
	for _, k := range Kinds {
		if keep(k) {
			ns = append(ns, k.Name)
		}
	}
	return ns
}

// List is names for a message: "a, b or c".
func List(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Help is --backend's help: every backend with its words.
func Help() string {
	var hs []string
	for _, k := range Kinds {
		hs = append(hs, cmp.Or(k.Help, k.Name))
	}
	return strings.Join(hs, ", ")
}

// FlagKeys are the keys a backend flag sets (nil: no backend has that flag), one per row that
// names it, in the table's order.
func FlagKeys(flag string) []string {
	var keys []string
	for _, k := range Kinds {
		for _, f := range k.Flags {
			if f.Name == flag {
				keys = append(keys, f.Key)
			}
		}
	}
	return keys
}

// UsesSection says the backend named name reads config section section (its checks apply).
func UsesSection(name, section string) bool {
	return section != "" && Of(name).Section == section
}
