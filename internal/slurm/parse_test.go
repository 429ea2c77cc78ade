package slurm

import (
	"os"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A real 22.05 node list: names, gres, partitions, the drain and its reason (with "=" and ":" in
// it) told from the user and time Slurm adds.
func TestParseNodesReal2205(t *testing.T) {
	nodes, err := ParseNodes(fixture(t, "scontrol-show-node-22.05.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("%d nodes", len(nodes))
	}
	n1, n3 := nodes[0], nodes[2]
	if n1.Name != "node1" || n1.GPUs != 8 || n1.State != "IDLE" || n1.Drained() || n1.Unusable() != "" || strings.Join(n1.Partitions, ",") != "gpu,debug" {
		t.Errorf("node1: %+v", n1)
	}
	if !n3.Drained() || n3.Unusable() != "drained" || n3.Reason != "ops: fan replaced, burn-in pending" || n3.ReasonBy != "root" {
		t.Errorf("node3: %+v", n3)
	}
}

func TestGresGPUs(t *testing.T) {
	for in, want := range map[string]int{
		"gpu:8": 8, "gpu:h100:4(S:0-1),gpu:a100:2": 6, "gpu:8(IDX:0-7)": 8, "(null)": 0, "": 0,
		"nic:2,gpu:h200:8(S:0-1)": 8, "gpu": 1, "gpu:h100": 1, "mps:400,gpu:2": 2,
	} {
		if got, err := GresGPUs(in); err != nil || got != want {
			t.Errorf("GresGPUs(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := GresGPUs("gpu:h100:lots"); err == nil {
		t.Error("a count that is no number was taken")
	}
}

func TestParseJobStates(t *testing.T) {
	for file, want := range map[string]Job{
		"scontrol-show-job-completed-22.05.txt": {State: "COMPLETED", Reason: "None"},
		"scontrol-show-job-held.txt":            {State: "PENDING", Reason: "JobHeldUser"},
		"scontrol-show-job-nodefail.txt":        {State: "NODE_FAIL", Reason: "NodeDown", Signal: 9},
	} {
		j, err := ParseJob(fixture(t, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if j.ID != "3" || j.State != want.State || j.Reason != want.Reason || j.Signal != want.Signal || j.NodeList == "" && j.State != "PENDING" {
			t.Errorf("%s: %+v, want %+v", file, j, want)
		}
		if j.Final() != (want.State != "PENDING") {
			t.Errorf("%s: Final %v", file, j.Final())
		}
	}
}

func TestParseJobID(t *testing.T) {
	for in, want := range map[string]string{"42\n": "42", "42;cluster\n": "42", "sbatch: warning: x\n77\n": "77"} {
		if got, err := ParseJobID(in); err != nil || got != want {
			t.Errorf("ParseJobID(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "Submitted batch job 42", "42_1", "-1", "42; rm -rf /"} {
		if got, err := ParseJobID(bad); err == nil {
			t.Errorf("ParseJobID(%q) = %q: want an error", bad, got)
		}
	}
}

func TestReasonBoundedOneLine(t *testing.T) {
	r := Reason("20261203T000000Z-abc", results.StatusFailed, "gemm_bf16 (gpu 3): 0.41 of peak\nmore  "+strings.Repeat("é", 400))
	if !strings.HasPrefix(r, "gpuvet 20261203T000000Z-abc: failed: gemm_bf16 (gpu 3): 0.41 of peak more ") || len(r) > maxReason || strings.Contains(r, "\n") {
		t.Errorf("reason %q (%d bytes)", r, len(r))
	}
}

func TestClusterName(t *testing.T) {
	if got := ClusterName("Configuration data as of x\nAuthType                = auth/munge\nClusterName             = gpuvet-test\n"); got != "gpuvet-test" {
		t.Errorf("%q", got)
	}
}

// Fuzz: any scontrol/sbatch output is parsed without panicking, in bounded memory, and a parsed
// job id is always one scancel may be given.
func FuzzParseNodes(f *testing.F) {
	f.Add(fixture(&testing.T{}, "scontrol-show-node-22.05.txt"))
	f.Add("NodeName=a State=DOWN* Gres=gpu:x:2(S:0) Reason=x=y [u@t]")
	f.Add("NodeName= Gres=gpu:99999999999")
	f.Fuzz(func(t *testing.T, s string) {
		nodes, err := ParseNodes(s)
		if err == nil {
			for _, n := range nodes {
				if n.Name == "" || n.GPUs < 0 {
					t.Fatalf("%+v", n)
				}
			}
		}
	})
}

func FuzzParseJob(f *testing.F) {
	f.Add(fixture(&testing.T{}, "scontrol-show-job-completed-22.05.txt"))
	f.Add("JobId=1 JobState=RUNNING Reason=None ExitCode=x:y")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseJob(s)
		if id, err := ParseJobID(s); err == nil && !ValidJobID(id) {
			t.Fatalf("job id %q", id)
		}
	})
}

// sbatch --parsable's answer is outside input: only a job id gpuvet can pass back is accepted.
func FuzzParseJobID(f *testing.F) {
	f.Add("41\n")
	f.Add("sbatch: warning: x\n41;cluster\n")
	f.Add("41; scancel -u root")
	f.Fuzz(func(t *testing.T, out string) {
		if id, err := ParseJobID(out); err == nil && !ValidJobID(id) {
			t.Fatalf("%q gave job id %q", out, id)
		}
	})
}
