//go:build !unix

package modelcache

// lockBlob is a no-op where flock is unavailable: one gpuvet process per cache there.
func lockBlob(cacheDir, repo, blob string) (func(), error) { return func() {}, nil }

// checkFreeSpace cannot ask the filesystem here: the writes will tell.
func checkFreeSpace(dir string, need int64) error { return nil }
