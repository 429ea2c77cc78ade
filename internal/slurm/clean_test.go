package slurm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// scriptedSlurm answers by the command line's prefix and records every command.
type scriptedSlurm struct {
	answers map[string]string // prefix → stdout; "ERR:" → an error with that text
	calls   []string
}

func (s *scriptedSlurm) Run(_ context.Context, name string, args ...string) (string, error) {
	line := name + " " + strings.Join(args, " ")
	s.calls = append(s.calls, line)
	best := ""
	for p := range s.answers {
		if strings.HasPrefix(line, p) && len(p) > len(best) {
			best = p
		}
	}
	a := s.answers[best]
	if e, ok := strings.CutPrefix(a, "ERR:"); ok {
		return "", errors.New(e)
	}
	return a, nil
}

func (s *scriptedSlurm) ran(prefix string) bool {
	for _, c := range s.calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// clean after a kill: the run's job is cancelled by id; a job id the manifest names but that
// carries another name is left alone (the manifest is a file anyone may edit); a held job never
// recorded is found by its exact name; a resumed node gets gpuvet's drain back; the reservation
// goes last.
func TestCleanFromManifest(t *testing.T) {
	state := t.TempDir()
	m, err := fleet.NewManifest(t.TempDir(), "slurm", "R1", map[string]string{"slurm_cluster": "c1"})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ReadDrains(state)
	d.Nodes["c1/n3"] = Drain{RunID: "R0", Reason: "gpuvet R0: failed: x"}
	d.Save()
	for _, o := range []fleet.Object{
		{Kind: KindResv, Name: "gpuvet-R1"},
		{Kind: KindResumed, Name: "n3", On: "gpuvet-R1"},
		{Kind: KindJob, Name: "11", Host: "n1"},
		{Kind: KindJob, Name: "12", Host: "n2"},
		{Kind: KindSubmit, Name: "gpuvet-R1-n4", Host: "n4"},
	} {
		m.Record(o)
	}
	s := &scriptedSlurm{answers: map[string]string{
		"scontrol -o show job 11":       "JobId=11 JobName=gpuvet-R1-n1 JobState=RUNNING Reason=None ExitCode=0:0 WorkDir=/nonexistent",
		"scontrol -o show job 12":       "JobId=12 JobName=someones-training JobState=RUNNING Reason=None ExitCode=0:0",
		"scancel 11":                    "",
		"squeue -h --name=gpuvet-R1-n4": "40 gpuvet-R1-n4\n41 gpuvet-R1-n40\n",
		"scontrol -o show job 40":       "JobId=40 JobName=gpuvet-R1-n4 JobState=PENDING Reason=JobHeldUser ExitCode=0:0",
		"scontrol -o show node n3":      "NodeName=n3 Gres=gpu:8 State=IDLE+RESERVED",
		"scontrol update nodename=n3":   "",
		"scontrol delete reservation=":  "",
	}}
	// Once cancelled, jobs 11 and 40 read CANCELLED.
	cancelled := map[string]bool{}
	run := &cancelAware{s: s, cancelled: cancelled}
	err = Clean(context.Background(), run, m, state, func(string) {})
	if err == nil || !strings.Contains(err.Error(), `job 12 is named "someones-training"`) {
		t.Fatalf("err %v: want job 12 refused", err)
	}
	for _, want := range []string{"scancel 11", "scancel 40", "scontrol update nodename=n3 state=drain reason=gpuvet R0: failed: x", "scontrol delete reservation=gpuvet-R1"} {
		if !s.ran(want) {
			t.Errorf("did not run %q: %q", want, s.calls)
		}
	}
	for _, never := range []string{"scancel 12", "scancel 41"} {
		if s.ran(never) {
			t.Errorf("ran %q: not the run's", never)
		}
	}
	if live := m.Live(); len(live) != 1 || live[0].Name != "12" {
		t.Errorf("live after clean: %v (want only the refused job)", live)
	}
}

// cancelAware makes a cancelled job read CANCELLED.
type cancelAware struct {
	s         *scriptedSlurm
	cancelled map[string]bool
}

func (c *cancelAware) Run(ctx context.Context, name string, args ...string) (string, error) {
	if name == "scancel" {
		c.cancelled[args[0]] = true
	}
	if name == "scontrol" && len(args) == 4 && args[2] == "job" && c.cancelled[args[3]] {
		c.s.calls = append(c.s.calls, "scontrol -o show job "+args[3])
		return "JobId=" + args[3] + " JobName=x JobState=CANCELLED Reason=None ExitCode=0:15", nil
	}
	return c.s.Run(ctx, name, args...)
}
