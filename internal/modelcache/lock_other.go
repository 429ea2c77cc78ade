//go:build !unix

package modelcache

// lockBlob is a no-op where flock is unavailable: one gpuvet process per cache there.
func lockBlob(cacheDir, repo, blob string) (func(), error) { return func() {}, nil }
