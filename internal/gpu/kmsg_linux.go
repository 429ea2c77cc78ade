package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
)

// ReadKmsg reads what the kernel ring buffer holds now through path (/dev/kmsg), without waiting
// for more: each read is one record, EAGAIN is the end. It keeps the NVIDIA driver's records
// ("NVRM:") and stops at MaxKernelLogBytes read or MaxKernelLogRecords kept (Truncated). Only the
// records since boot that the buffer still holds are there. Not root, or in a container without
// the host's log: an error saying so.
func ReadKmsg(path string) (KernelLogText, error) {
	out := KernelLogText{Source: path}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return out, fmt.Errorf("open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	buf := make([]byte, 16<<10) // a record is at most 8 KiB (PRINTK_MESSAGE_MAX)
	var kept bytes.Buffer
	read, records := 0, 0
	for {
		n, err := syscall.Read(fd, buf)
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EINTR) {
			continue // a record overwritten while we read: the next one follows
		}
		if err != nil && !errors.Is(err, syscall.EAGAIN) && records == 0 {
			return out, fmt.Errorf("read %s: %w", path, err)
		}
		if err != nil || n <= 0 { // EAGAIN: the end
			break
		}
		read += n
		out.Records++
		rec := buf[:n]
		if bytes.Contains(rec, []byte("NVRM:")) {
			kept.Write(bytes.TrimRight(rec, "\n"))
			kept.WriteByte('\n')
			records++
		}
		if read >= MaxKernelLogBytes || records >= MaxKernelLogRecords {
			out.Truncated = true
			break
		}
	}
	out.Text = kept.Bytes()
	return out, nil
}
