package pipeline

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
)

func TestMaxNumSeqs(t *testing.T) {
	var c config.Config
	c.Backend = "sim"
	if got := maxNumSeqs(c); got != 256 {
		t.Errorf("sim: %d, want the simulator's 256", got)
	}
	c.Backend = "vllm"
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"--max-num-seqs", "512"}, 512},
		{[]string{"--enforce-eager", "--max-num-seqs=1024"}, 1024},
		{[]string{"--max-num-seqs", "x"}, 0},
		{[]string{"--max-num-seqs"}, 0},
	} {
		c.Engine.ExtraArgs = tc.args
		if got := maxNumSeqs(c); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.args, got, tc.want)
		}
	}
}
