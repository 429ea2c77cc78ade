//go:build !unix

package modelcache

import "errors"

// Own is for the populate Job's init container, which runs on Linux.
func Own(dir string, uid, gid int) (string, error) {
	return "", errors.New("gpuvet cache own: only on Unix")
}
