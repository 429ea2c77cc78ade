//go:build linux

package netstamp

import "golang.org/x/sys/unix"

// OOBSize is the control-message buffer RecvFD needs for one SCM_TIMESTAMPING message.
var OOBSize = unix.CmsgSpace(3 * 16)

// EnableFD turns on software receive timestamps for a raw TCP socket (the load generator's event loop
// reads its sockets itself, with recvmsg, so it cannot use Enable's net.Conn wrapper).
func EnableFD(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING,
		unix.SOF_TIMESTAMPING_RX_SOFTWARE|unix.SOF_TIMESTAMPING_SOFTWARE)
}

// RecvFD reads from a non-blocking socket with recvmsg, returning the bytes read and the kernel's
// software receive time (unix ns) of the newest segment the read consumed (0: none). oob must hold
// OOBSize bytes. It does not allocate.
func RecvFD(fd int, p, oob []byte) (n int, stamp int64, err error) {
	n, oobn, _, _, err := unix.Recvmsg(fd, p, oob, 0)
	if err != nil {
		return 0, 0, err
	}
	return n, scmTimestamp(oob[:oobn]), nil
}
