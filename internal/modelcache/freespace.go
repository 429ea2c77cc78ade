package modelcache

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// checkFreeSpace fails before the first byte when the disk cannot hold what is left to fetch.
func checkFreeSpace(dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	free, ok := filelimit.FreeBytes(dir)
	if ok && free >= 0 && free < need {
		return fmt.Errorf("disk full: %s needs %s more but %s is free; free space or use --cache-dir on a larger disk",
			dir, HumanBytes(need), HumanBytes(free))
	}
	return nil // enough, or unknown: the writes will tell
}
