//go:build !linux

package gpu

import "fmt"

// ReadKmsg reads the kernel log on Linux only.
func ReadKmsg(path string) (KernelLogText, error) {
	return KernelLogText{Source: path}, fmt.Errorf("%s: the kernel log is read on Linux only", path)
}
