package slurm

import (
	"context"
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
