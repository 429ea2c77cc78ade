package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// jobStates answers `scontrol -o show job` from a script of answers, the last one repeated.
type jobStates struct{ answers []string }

func (j *jobStates) Run(_ context.Context, name string, args ...string) (string, error) {
	a := j.answers[0]
	if len(j.answers) > 1 {
		j.answers = j.answers[1:]
	}
	if e, ok := strings.CutPrefix(a, "ERR:"); ok {
		return "", errors.New(e)
	}
	return a, nil
}

func waitHost(s Runner, queue time.Duration) *Host {
	c := config.Slurm{Poll: config.Duration(time.Millisecond), QueueTimeout: config.Duration(queue)}
	return &Host{jobID: "7", node: Node{Name: "n1"}, released: time.Now(), f: &Fleet{Config: c, Slurm: s}}
}

func TestWaitRidesOutAControllerRestart(t *testing.T) {
	running := "JobId=7 JobName=x JobState=RUNNING Reason=None ExitCode=0:0"
	s := &jobStates{answers: []string{running, "ERR:Unable to contact slurm controller", "ERR:Unable to contact slurm controller", running,
		"JobId=7 JobName=x JobState=COMPLETED Reason=None ExitCode=0:0"}}
	j, err := waitHost(s, time.Hour).wait(context.Background())
	if err != nil || j.State != "COMPLETED" {
		t.Fatalf("%+v %v", j, err)
	}
	s = &jobStates{answers: []string{"ERR:Unable to contact slurm controller"}}
	if _, err := waitHost(s, time.Hour).wait(context.Background()); err == nil || !strings.Contains(err.Error(), "11 reads of its state failed in a row") {
		t.Fatalf("a controller gone for good: %v", err)
	}
}

func TestWaitQueueTimeout(t *testing.T) {
	s := &jobStates{answers: []string{"JobId=7 JobName=x JobState=PENDING Reason=Resources ExitCode=0:0"}}
	_, err := waitHost(s, 20*time.Millisecond).wait(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not start within slurm.queue_timeout") || !strings.Contains(err.Error(), "Resources") {
		t.Fatalf("%v", err)
	}
}

// The job's output comes back line by line as it is written, a line cut by a read kept whole.
func TestFollowerLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slurm-7.out")
	var got []string
	var f follower
	say := func(l string) { got = append(got, l) }
	os.WriteFile(p, []byte("one\ntw"), 0o644)
	f.lines(p, say)
	fh, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("o\r\nthree\n")
	fh.Close()
	f.lines(p, say)
	f.lines(p, say)
	if strings.Join(got, "|") != "one|two|three" {
		t.Fatalf("%q", got)
	}
}

// A node's job preempted or cancelled by someone else is a disruption (results.Disrupted): the
// node is inconclusive, not failed; a job that ran out of its time limit is not one.
func TestPreemptedJobIsADisruption(t *testing.T) {
	for state, want := range map[string]bool{"PREEMPTED": true, "CANCELLED": true, "TIMEOUT": false, "NODE_FAIL": false} {
		s := &jobStates{answers: []string{"JobId=7 JobName=x JobState=" + state + " Reason=None ExitCode=0:15"}}
		h := waitHost(s, time.Hour)
		h.dir = t.TempDir()
		_, err := h.Run(context.Background())
		if err == nil || (results.DisruptionOf(err) != "") != want {
			t.Errorf("%s: %v (disruption %q), want a disruption %v", state, err, results.DisruptionOf(err), want)
		}
	}
}
