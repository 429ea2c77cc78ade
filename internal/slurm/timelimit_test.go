package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
)

// sbatch --time counts whole minutes: a time_limit between them is rounded up, never down (90 s
// as --time=1 killed the job 30 s before the limit the user set and the run reported).
func TestTimeLimitRoundsUp(t *testing.T) {
	c := defaults()
	c.TimeLimit = config.Duration(90 * time.Second)
	f, s := hostsFleet(t, c, map[string]string{"sbatch": "41\n", "scontrol release 41": ""})
	hs, _, err := f.Hosts(context.Background(), runInfo(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs[0].Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, call := range s.calls {
		if strings.HasPrefix(call, "sbatch ") && !strings.Contains(call, "--time=2 ") {
			t.Fatalf("time_limit 1m30s: %s", call)
		}
	}
}

// A job stuck after scancel (COMPLETING on a node that stopped answering, a common Slurm state) is
// waited for a bounded time: `gpuvet clean`, which has no deadline, ends with an error naming it.
func TestCancelWaitBounded(t *testing.T) {
	s := &scriptedSlurm{answers: map[string]string{
		"scancel 41":              "",
		"scontrol -o show job 41": "JobId=41 JobName=gpuvet-r1-g1 JobState=COMPLETING Reason=None ExitCode=0:0",
	}}
	defer func(d time.Duration) { cancelWait = d }(cancelWait)
	cancelWait = time.Second
	done := make(chan error, 1)
	go func() { done <- Cancel(context.Background(), s, "41") }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "COMPLETING") {
			t.Fatalf("a job stuck completing: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Cancel waited forever for a job stuck completing")
	}
}

// When the job has ended its output is followed to the end: a job that wrote more than one read's
// worth since the last poll still has its last lines (the node's verdict) said.
func TestFollowerRestReadsToTheEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slurm-7.out")
	os.WriteFile(p, []byte(strings.Repeat("engine log line\n", 20000)+"done: status ok\n"), 0o644)
	var last string
	var f follower
	f.rest(p, func(l string) { last = l })
	if last != "done: status ok" {
		t.Fatalf("last line said: %q", last)
	}
}
