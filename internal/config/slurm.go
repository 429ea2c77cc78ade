package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
)

// Slurm configures backend slurm: a Slurm cluster's GPU nodes, each vetted in place by one
// exclusive job that runs the host pipeline there (docs/slurm.md).
type Slurm struct {
	// Partition, Nodes (names or hostlists, node[1-4]) and Reservation choose the nodes, a node
	// matching each given; none: every node with GPUs (gres gpu).
	Partition   string   `yaml:"partition"`
	Nodes       []string `yaml:"nodes"`
	Reservation string   `yaml:"reservation"`
	// Binary is gpuvet as the nodes run it, a path every node sees. Default: this executable.
	Binary string `yaml:"binary"`
	// SharedDir is where each node's job writes its plan, script, log and results, seen at the same
	// path by every node and this machine. Default: --out.
	SharedDir string `yaml:"shared_dir"`
	// RemoteBackend is what a node's job runs: local (engines on its GPUs) or sim.
	RemoteBackend string `yaml:"remote_backend"`
	// TimeLimit is each job's Slurm time limit (sbatch --time); QueueTimeout bounds how long a job
	// may wait to start (a node busy with other work) before gpuvet cancels it.
	TimeLimit    Duration `yaml:"time_limit"`
	QueueTimeout Duration `yaml:"queue_timeout"`
	// Account and QOS are passed to sbatch when set.
	Account string `yaml:"account"`
	QOS     string `yaml:"qos"`
	// Parallel is how many nodes' jobs run at once.
	Parallel int `yaml:"parallel"`
	// NodeSet are key=value overrides for one node's run, by node name (as an inventory's set).
	NodeSet map[string][]string `yaml:"node_set"`
	// DrainFailed drains each failed node with a reason (scontrol update state=drain), DrainFlagged
	// flagged ones too; a node gpuvet drained is resumed by a later run that finds it ok.
	DrainFailed  bool `yaml:"drain_failed"`
	DrainFlagged bool `yaml:"drain_flagged"`
	// MaxDrain is the circuit breaker (fleet.Breaker): the most nodes one run may drain, a count
	// ("3") or a share ("10%", at least 1); past it the rest are only reported and the run fails: so
	// many at once is more likely the run's own problem than the fleet's.
	MaxDrain string `yaml:"max_drain"`
	// DryRun shows every drain and resume and takes none (the jobs still run: vetting needs them).
	DryRun bool `yaml:"dry_run"`
	// Poll is how often a job's state is read (scontrol show job).
	Poll Duration `yaml:"poll"`
}

func slurmDefaults() Slurm {
	return Slurm{RemoteBackend: "local", TimeLimit: Duration(2 * time.Hour), QueueTimeout: Duration(30 * time.Minute),
		Parallel: 16, MaxDrain: DefaultMaxUnhealthy, Poll: Duration(2 * time.Second)}
}

// slurmChecks are the rules over slurm.*.
func slurmChecks(c Config) []check {
	s := c.Slurm
	badSet := ""
	for _, n := range slices.Sorted(maps.Keys(s.NodeSet)) {
		for _, kv := range s.NodeSet[n] {
			if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" {
				badSet = fmt.Sprintf("node %s: %q: want key=value", n, kv)
			}
		}
	}
	return []check{
		{"slurm.remote_backend", !slices.Contains(backendkind.RemoteNames(), s.RemoteBackend), "want " + backendkind.List(backendkind.RemoteNames())},
		{"slurm.shared_dir", s.SharedDir != "" && s.SharedDir[0] != '/', "want an absolute folder every node sees at the same path (or empty: --out)"},
		{"slurm.binary", s.Binary != "" && s.Binary[0] != '/', "want gpuvet's absolute path as the nodes see it (or empty: this executable, on a shared file system)"},
		{"slurm.time_limit", s.TimeLimit < Duration(time.Minute), "want a duration of at least 1m (sbatch --time counts minutes)"},
		{"slurm.queue_timeout", s.QueueTimeout <= 0, "want a positive duration"},
		{"slurm.parallel", s.Parallel < 1, "want ≥ 1"},
		{"slurm.poll", s.Poll < Duration(10*time.Millisecond), "want ≥ 10ms"},
		errCheck("slurm.max_drain", errOf(ParseMaxUnhealthy(s.MaxDrain))),
		{"slurm.node_set", badSet != "", badSet},
		{"slurm.partition", strings.ContainsAny(s.Partition, " ,\n"), "want one partition name"},
		{"slurm.reservation", strings.ContainsAny(s.Reservation, " ,\n"), "want one reservation name"},
	}
}
