package report

import (
	"os/exec"
	"syscall"
)

// ownGroup runs the browser in a process group of its own, so a timeout kills it with the renderer
// and GPU processes it started (they hold its output open: killing the browser alone left them
// running, and the report waiting on them); the kernel kills it if gpuvet dies first (Ctrl-C no
// longer reaches a process outside the terminal's foreground group).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
