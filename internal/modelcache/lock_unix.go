//go:build unix

package modelcache

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockBlob takes an exclusive flock on <cache>/.locks/<repo>/<blob>.lock (the hub libraries' lock
// place), so two gpuvet processes never write the same .incomplete file. The lock dies with the
// process, so a killed pull leaves no stale lock.
func lockBlob(cacheDir, repo, blob string) (func(), error) {
	dir := filepath.Join(cacheDir, ".locks", filepath.Base(repo))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(filepath.Join(dir, blob+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX); err != nil {
		fh.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(fh.Fd()), syscall.LOCK_UN); fh.Close() }, nil
}
