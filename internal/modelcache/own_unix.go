//go:build unix

package modelcache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Own gives a cache volume's root folder to uid:gid, so that a populate step running as that user
// can write it: a fresh volume comes up root:root 0755 (ext4/xfs block volumes, hostPath), and
// Kubernetes' fsGroup does not change hostPath or NFS volumes. Only the root folder changes hands:
// everything below it is written by the populate step itself, 0755/0644, so an engine of any user
// reads it. Its mode keeps at least 0755. It says what it did; a root already owned is left alone.
func Own(dir string, uid, gid int) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a folder", dir)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("%s: no owner information on this system", dir)
	}
	mode := st.Mode().Perm()
	want := mode | 0o755
	if int(sys.Uid) == uid && mode == want {
		return fmt.Sprintf("%s: already owned by uid %d (mode %04o)", dir, uid, mode), nil
	}
	if int(sys.Uid) != uid {
		if err := os.Chown(dir, uid, gid); err != nil {
			if errors.Is(err, syscall.EPERM) {
				return "", fmt.Errorf("chown %s to %d:%d: %v: this volume does not let root change its owner (an NFS export with root squash?); "+
					"make its root writable by uid %d on the storage side, or use a StorageClass that applies fsGroup", dir, uid, gid, err, uid)
			}
			return "", fmt.Errorf("chown %s to %d:%d: %w", dir, uid, gid, err)
		}
	}
	if mode != want {
		if err := os.Chmod(dir, want); err != nil {
			return "", fmt.Errorf("chmod %s to %04o: %w", dir, want, err)
		}
	}
	return fmt.Sprintf("%s: was uid %d gid %d mode %04o, now uid %d gid %d mode %04o", dir, sys.Uid, sys.Gid, mode, uid, gid, want), nil
}
