//go:build unix

package filelimit

import "syscall"

// FreeBytes is the space left to an unprivileged writer on dir's file system; false when the file
// system cannot tell.
func FreeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
