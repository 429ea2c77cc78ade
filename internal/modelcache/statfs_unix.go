//go:build unix

package modelcache

import (
	"fmt"
	"syscall"
)

// checkFreeSpace fails before the first byte when the disk cannot hold what is left to fetch.
func checkFreeSpace(dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // unknown: the writes will tell
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free >= 0 && free < need {
		return fmt.Errorf("disk full: %s needs %s more but %s is free; free space or use --cache-dir on a larger disk",
			dir, HumanBytes(need), HumanBytes(free))
	}
	return nil
}
