package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Finding 5 of issue 43: a URL's password and its key-like query values never appear in any output
// of an error path, whichever command meets it: every path goes through results.RedactURLs. The
// server answers 404 to everything (bench printed "GET http://user:CANARY@…: HTTP 404").
func TestNoURLSecretOnAnyErrorPath(t *testing.T) {
	const canary = "CANARYs3cret"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "http://")
	secretURL := "http://user:" + canary + "@" + hostport + "/nope?api_key=" + canary + "&sig=" + canary
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	// A killed OpenNebula run's manifest whose front-end is the canary URL (its query included).
	one := "http://" + hostport + "/RPC2?token=" + canary
	m, err := fleet.NewManifest(state, "opennebula", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Record(fleet.Object{Kind: "opennebula-vm", Name: "gpuvet-r1-a", Host: one})
	m.Keep()
	for _, c := range []struct {
		name string
		args []string
		env  []string
	}{
		{"bench", []string{"bench", "--url", secretURL, "--model", "m"}, nil},
		{"bench, no server", []string{"bench", "--url", "http://user:" + canary + "@127.0.0.1:1/?key=" + canary, "--model", "m"}, nil},
		{"run --backend endpoint", []string{"run", "--backend", "endpoint", "--url", secretURL, "--model", "m", "--out", filepath.Join(dir, "out")}, nil},
		{"cache pull", []string{"cache", "pull", "--endpoint", secretURL, "--cache-dir", filepath.Join(dir, "hub"), "org/model"}, nil},
		{"clean, front-end not confirmed", []string{"clean"}, []string{"ONE_AUTH=a:" + canary}},
		{"clean", []string{"clean", "--set", "opennebula.endpoint=http://user:" + canary + "@" + hostport + "/RPC2?token=" + canary},
			[]string{"ONE_AUTH=a:b", "GPUVET_OPENNEBULA_POLL=20ms"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		self, _ := os.Executable()
		cmd := exec.CommandContext(ctx, self, c.args...)
		cmd.Env = append(append(os.Environ(), "GPUVET_TEST_AS_GPUVET=1", "GPUVET_STATE_DIR="+state, "HF_ENDPOINT=", "HF_TOKEN="), c.env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err == nil {
			t.Errorf("%s: no error against a server that answers 404\n%s", c.name, out.String())
		}
		if strings.Contains(out.String(), canary) {
			t.Errorf("%s: the canary is in its output:\n%s", c.name, out.String())
		}
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !strings.HasPrefix(p, state) {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(canary)) {
				t.Errorf("the canary is in %s", p)
			}
		}
		return nil
	})
}
