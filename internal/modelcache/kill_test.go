package modelcache

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// TestHelperPullProcess is the child of TestResumeAfterSIGKILL: a plain pull, killed mid-file.
func TestHelperPullProcess(t *testing.T) {
	if os.Getenv("GPUVET_TEST_PULL_CHILD") != "1" {
		t.Skip("helper for TestResumeAfterSIGKILL")
	}
	o := Options{CacheDir: os.Getenv("GPUVET_TEST_CACHE"), Endpoint: os.Getenv("GPUVET_TEST_ENDPOINT"), Workers: 2}
	_, err := Pull(context.Background(), os.Getenv("GPUVET_TEST_MODEL"), o)
	t.Fatalf("the child pull was meant to be killed, it ended with %v", err)
}

// TestResumeAfterSIGKILL kills a pulling process with SIGKILL (no chance to clean up), then pulls
// again and shows the download resumed via Range from the partial file's size.
func TestResumeAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	cache := isolate(t)
	repo := testModel("acme/killed", 8)
	fh := newFakeHub(t, repo)
	big := "model-00001-of-00002.safetensors"
	fh.mu.Lock()
	fh.slow[big] = 3 * time.Millisecond
	fh.mu.Unlock()
	reached := make(chan struct{})
	var once sync.Once
	fh.mu.Lock()
	fh.onBytes = func(p string, n int64) {
		if p == big && n >= 1<<20 {
			once.Do(func() { close(reached) })
		}
	}
	fh.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPullProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GPUVET_TEST_PULL_CHILD=1", "GPUVET_TEST_CACHE="+cache,
		"GPUVET_TEST_ENDPOINT="+fh.endpoint(), "GPUVET_TEST_MODEL="+repo.model)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child never got 1 MiB into the shard")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	fh.quiesce()
	fh.mu.Lock()
	fh.slow[big], fh.onBytes = 0, nil
	fh.mu.Unlock()

	inc := blobPath(repoDir(cache, repo.model), repo.blobID(big)) + ".incomplete"
	st, err := os.Stat(inc)
	if err != nil || st.Size() < 1<<19 {
		t.Fatalf("after SIGKILL the partial file %s: %v", inc, err)
	}
	assertResumes(t, fh, cache, repo, big, st.Size())
}
