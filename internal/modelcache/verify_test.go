package modelcache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestVerifyAndList(t *testing.T) {
	cache := isolate(t)
	a, b := testModel("acme/one", 10), testModel("two", 11)
	fh := newFakeHub(t, a, b)
	for _, m := range []string{a.model, b.model} {
		if _, err := Pull(context.Background(), m, opts(fh, cache)); err != nil {
			t.Fatal(err)
		}
	}
	snaps, err := List(cache)
	if err != nil || len(snaps) != 2 {
		t.Fatalf("List: %v %+v", err, snaps)
	}
	if snaps[0].Model != "acme/one" || snaps[1].Model != "two" || snaps[0].Size != a.total() ||
		len(snaps[0].Files) != len(a.files) || strings.Join(snaps[0].Refs, ",") != "main" {
		t.Fatalf("List = %+v", snaps)
	}
	if err := Verify(cache, ""); err != nil {
		t.Fatal(err)
	}

	// Flip one byte of a blob: Verify names the file and the blob.
	rd := repoDir(cache, a.model)
	shard := "model-00002-of-00002.safetensors"
	bp := blobPath(rd, a.blobID(shard))
	data, _ := os.ReadFile(bp)
	data[10] ^= 1
	if err := os.WriteFile(bp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// And break a link of the other model.
	if err := os.Remove(blobPath(repoDir(cache, b.model), b.blobID("config.json"))); err != nil {
		t.Fatal(err)
	}
	err = Verify(cache, "")
	if err == nil || !strings.Contains(err.Error(), shard) || !strings.Contains(err.Error(), "hashes to") ||
		!strings.Contains(err.Error(), "dangling") || !strings.Contains(err.Error(), "2 problem(s)") {
		t.Fatalf("Verify after corruption: %v", err)
	}
	if err := Verify(cache, "acme/absent"); err == nil || !strings.Contains(err.Error(), "gpuvet cache pull acme/absent") {
		t.Fatalf("Verify of an absent model: %v", err)
	}
	// The next pull of a model with a missing blob fetches only that blob.
	fh.reset()
	if _, err := Pull(context.Background(), b.model, opts(fh, cache)); err != nil {
		t.Fatal(err)
	}
	if fh.totalServed() != int64(len(b.files["config.json"])) {
		t.Fatalf("re-pull served %d bytes, want only config.json's %d", fh.totalServed(), len(b.files["config.json"]))
	}
}

func TestDiskErrors(t *testing.T) {
	f := File{Path: "model.safetensors"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, "disk full"},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, "permission denied"},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, "permission denied"},
		{errors.New("other"), "other"},
	} {
		err := diskError(tc.err, "acme/m", f, "write")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "model.safetensors") || !errors.Is(err, tc.err) {
			t.Errorf("diskError(%v) = %v; want %q", tc.err, err, tc.want)
		}
	}
	if err := checkFreeSpace(t.TempDir(), 1<<62); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("free-space check for 4 EiB: %v", err)
	}
}

// TestWriteToFullDisk writes a download into /dev/full, the kernel's always-full device: the pull
// must fail with the disk-full message and keep nothing in the snapshot.
func TestWriteToFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	cache := isolate(t)
	repo := testModel("acme/full", 12)
	repo.files = map[string][]byte{"model.safetensors": randBytes(1, 1<<20)}
	repo.lfs = map[string]bool{"model.safetensors": true}
	fh := newFakeHub(t, repo)
	rd := repoDir(cache, repo.model)
	if err := os.MkdirAll(filepath.Join(rd, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := File{Path: "model.safetensors", Size: 1 << 20, Blob: repo.blobID("model.safetensors"), LFS: true}
	h, _ := newHub(fh.endpoint(), "")
	h.retry = *fastRetry
	ft := &fetcher{h: h, cacheDir: cache, repo: rd, model: repo.model, commit: repo.commit, progress: func(int64) {}}
	d := &download{ft: ft, f: f, inc: "/dev/full", hasher: newHasher(f)}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	watchdog := time.AfterFunc(time.Hour, func() {})
	defer watchdog.Stop()
	_, err = d.copyBody(context.Background(), full, bytes.NewReader(repo.files["model.safetensors"]), watchdog, &atomic.Bool{})
	if err == nil || !strings.Contains(err.Error(), "disk full") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing to /dev/full: %v", err)
	}
}

// TestPermissionDenied: a cache folder the user cannot write gives the permission message (root
// writes anywhere, so this runs only as an ordinary user).
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions")
	}
	cache := isolate(t)
	repo := testModel("acme/ro", 17)
	fh := newFakeHub(t, repo)
	if err := os.MkdirAll(cache, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(cache, 0o755)
	_, err := Pull(context.Background(), repo.model, opts(fh, cache))
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "--cache-dir") {
		t.Fatalf("read-only cache: %v", err)
	}
}
