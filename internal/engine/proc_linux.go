package engine

import "syscall"

// procAttr puts the engine in its own process group (so Stop can kill it whole, grandchildren
// included) and asks the kernel to kill it if gpuvet itself dies without cleaning up.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
