package dcgm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

func read(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func find(tests []results.DCGMTest, name string, gpu int) *results.DCGMTest {
	for i := range tests {
		if tests[i].Name == name && tests[i].GPU != nil && *tests[i].GPU == gpu {
			return &tests[i]
		}
	}
	return nil
}

func TestParseFixtures(t *testing.T) {
	cases := []struct {
		file       string
		version    string
		count      int
		status     results.Status
		name       string
		gpu        int
		result     string
		infoSubstr string
	}{
		{"dcgm3-level2-fail.json", "3.3.9", 10, results.StatusFlag, "PCIe", 1, "fail", "below the minimum"},
		{"dcgm3-level2-fail.json", "3.3.9", 10, results.StatusFlag, "Memory", 1, "warn", "throttled"},
		{"dcgm3-level2-fail.json", "3.3.9", 10, results.StatusFlag, "Environmental Variables", 0, "skip", ""},
		{"dcgm4-level2-pass.json", "4.2.3", 8, results.StatusOK, "pcie", 0, "pass", "55.10 GB/s"},
		{"dcgm4-level2-pass.json", "4.2.3", 8, results.StatusOK, "diagnostic", 0, "skip", "disabled"},
		{"dcgm4-level1-fail.json", "4.1.1", 3, results.StatusFlag, "software", 1, "fail", "nvidia-smi -i 1 -pm 1"},
	}
	for _, c := range cases {
		tests, version, err := Parse(read(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if version != c.version || len(tests) != c.count || Judge(tests) != c.status {
			t.Errorf("%s: version %q, %d tests, status %s; want %q, %d, %s", c.file, version, len(tests), Judge(tests), c.version, c.count, c.status)
		}
		got := find(tests, c.name, c.gpu)
		if got == nil {
			t.Errorf("%s: no %s on GPU %d in %+v", c.file, c.name, c.gpu, tests)
			continue
		}
		if got.Result != c.result || !strings.Contains(got.Info, c.infoSubstr) {
			t.Errorf("%s: %s GPU %d = %s %q; want %s ~%q", c.file, c.name, c.gpu, got.Result, got.Info, c.result, c.infoSubstr)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "no JSON object"},
		{"dcgmi: error connecting to host engine", "no JSON object"},
		{`{"DCGM Diagnostic": {"test_categories": [`, "malformed JSON"},
		{`{"other": 1}`, "neither"},
		{`{"DCGM Diagnostic": {"test_categories": []}}`, "no test results"},
		{`{"DCGM Diagnostic": {"runtime_error": "Unable to detect GPUs"}}`, "Unable to detect GPUs"},
		{`{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": [{"entity_id": 0, "status": "Maybe"}]}]}]}}`, `status "Maybe"`},
		{`{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": [{"gpu_ids": "0,a", "status": "PASS"}]}]}]}}`, `"a" is not a GPU id`},
	}
	for _, c := range cases {
		_, _, err := Parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): err = %v, want ~%q", c.in, err, c.want)
		}
	}
}

func TestRunNotInstalled(t *testing.T) {
	d := Run(context.Background(), Options{Level: 2, Binary: "dcgmi-not-here-" + t.Name()})
	if d.Status != results.StatusSkipped || d.Note != NotInstalled {
		t.Errorf("got %+v, want skipped with %q", d, NotInstalled)
	}
}

// fakeDCGMI writes a shell script standing in for dcgmi.
func fakeDCGMI(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dcgmi")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunWithFake(t *testing.T) {
	abs, _ := filepath.Abs("testdata/dcgm4-level1-fail.json")
	cases := []struct {
		name    string
		body    string
		timeout time.Duration
		status  results.Status
		want    string
	}{
		// dcgmi exits 226 when a test fails, JSON still on stdout.
		{"fail exit with json", `[ "$1 $2 $3 $4" = "diag -r 1 -j" ] || exit 9; cat ` + abs + `; exit 226`, 0, results.StatusFlag, ""},
		{"no json", `echo "Error: unable to connect to host engine" >&2; exit 1`, 0, results.StatusFailed, "unable to connect"},
		{"timeout", `sleep 5`, 200 * time.Millisecond, results.StatusFailed, "did not finish"},
		// Endless output is cut at the bound, not held in memory.
		{"endless output", `cat ` + abs + `; head -c 70000000 /dev/zero`, 0, results.StatusFailed, "printed more than 64 MiB"},
	}
	for _, c := range cases {
		d := Run(context.Background(), Options{Level: 1, Timeout: c.timeout, Binary: fakeDCGMI(t, c.body)})
		if d.Status != c.status || !strings.Contains(d.Error, c.want) {
			t.Errorf("%s: %s %q, want %s ~%q", c.name, d.Status, d.Error, c.status, c.want)
		}
	}
	if d := Run(context.Background(), Options{Level: 7}); d.Status != results.StatusFailed {
		t.Errorf("level 7: %+v", d)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"dcgm3-level2-fail.json", "dcgm4-level2-pass.json", "dcgm4-level1-fail.json"} {
		f.Add(read(f, n))
	}
	f.Add([]byte(`{"DCGM GPU Diagnostic":{"test_categories":[null,{"tests":[null]}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tests, _, err := Parse(b)
		if err != nil {
			return
		}
		if len(tests) == 0 {
			t.Fatal("no error and no test")
		}
		for _, x := range tests {
			switch x.Result {
			case "pass", "fail", "warn", "skip":
			default:
				t.Fatalf("result %q not normalised", x.Result)
			}
		}
	})
}
