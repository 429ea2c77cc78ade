// Command readfloor measures the floor under any streaming client's CPU per token on this machine:
// the cost of only reading the bytes. A child process writes a 250-byte message on each of N
// loopback connections every -itl (one TCP segment per message, as a server sends one SSE event per
// token); this process reads and discards them, either with one goroutine per connection (as
// net/http does) or from one epoll loop over non-blocking sockets polled every -poll (as gpuvet's
// event-loop reader does; -ts adds SO_TIMESTAMPING and recvmsg, as it reads), and prints its own
// user+system CPU per message and per read.
//
//	go run ./bench/readfloor -mode goroutine
//	go run ./bench/readfloor -mode loop -poll 1ms -ts
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuvet/gpuvet/internal/netstamp"
)

const msgSize = 250

func main() {
	mode := flag.String("mode", "loop", "goroutine (one per connection) or loop (one epoll loop)")
	poll := flag.Duration("poll", time.Millisecond, "loop: how often the loop polls")
	ts := flag.Bool("ts", true, "loop: read with recvmsg and kernel receive timestamps")
	conns := flag.Int("conns", 128, "connections")
	itl := flag.Duration("itl", 4*time.Millisecond, "interval between messages on each connection")
	dur := flag.Duration("for", 6*time.Second, "how long to read")
	server := flag.Bool("server", false, "internal: be the writing child")
	flag.Parse()
	if *server {
		serve(*itl)
		return
	}
	fds, port, stop, err := connect(*conns, *itl)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer stop()
	c0 := cpu()
	var bytes, reads int
	switch *mode {
	case "goroutine":
		bytes = goroutines(port, fds, *dur)
	case "loop":
		bytes, reads = loop(fds, *poll, *ts, *dur)
	default:
		fmt.Fprintf(os.Stderr, "-mode %q: want goroutine or loop\n", *mode)
		os.Exit(2)
	}
	used := cpu() - c0
	msgs := bytes / msgSize
	fmt.Printf("%-9s poll %-6v ts %-5v messages %8d reads %8d  %6.2f µs CPU/message", *mode, *poll, *ts, msgs, reads, float64(used.Nanoseconds())/1e3/float64(max(msgs, 1)))
	if reads > 0 {
		fmt.Printf("  %6.2f µs/read", float64(used.Nanoseconds())/1e3/float64(reads))
	}
	fmt.Println()
}

// serve accepts connections and writes a message on each every itl until the parent goes.
func serve(itl time.Duration) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(0)
		return
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	msg := make([]byte, msgSize)
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			t := time.NewTicker(itl)
			for range t.C {
				if _, err := c.Write(msg); err != nil {
					os.Exit(0)
				}
			}
		}()
	}
}

// connect starts the writer and opens n connections to it; fds are duplicates the caller owns.
func connect(n int, itl time.Duration) (fds []int, port int, stop func(), err error) {
	srv := exec.Command(os.Args[0], "-server", "-itl", itl.String())
	out, err := srv.StdoutPipe()
	if err != nil {
		return nil, 0, nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, 0, nil, err
	}
	stop = func() { srv.Process.Kill(); srv.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return nil, 0, nil, fmt.Errorf("writer did not start: %w", err)
	}
	if port, err = strconv.Atoi(line[:max(len(line)-1, 0)]); err != nil || port == 0 {
		stop()
		return nil, 0, nil, fmt.Errorf("writer did not start: %q %w", line, err)
	}
	for range n {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			stop()
			return nil, 0, nil, err
		}
		raw, _ := c.(*net.TCPConn).SyscallConn()
		raw.Control(func(s uintptr) {
			if fd, err := unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0); err == nil {
				fds = append(fds, fd)
			}
		})
		c.Close()
	}
	return fds, port, stop, nil
}

// goroutines reads each connection in its own goroutine through the net package.
func goroutines(_ int, fds []int, dur time.Duration) int {
	done := make(chan int, len(fds))
	deadline := time.Now().Add(dur)
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "conn")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			done <- 0
			continue
		}
		go func() {
			b := make([]byte, 2048)
			got := 0
			c.SetReadDeadline(deadline)
			for {
				k, err := c.Read(b)
				got += k
				if err != nil {
					done <- got
					return
				}
			}
		}()
	}
	total := 0
	for range fds {
		total += <-done
	}
	return total
}

// loop reads every ready socket from one epoll set, polled every poll.
func loop(fds []int, poll time.Duration, ts bool, dur time.Duration) (bytes, reads int) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return 0, 0
	}
	for _, fd := range fds {
		unix.SetNonblock(fd, true)
		if ts {
			netstamp.EnableFD(fd)
		}
		unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
	}
	evs := make([]unix.EpollEvent, 1024)
	b := make([]byte, 64<<10)
	oob := make([]byte, netstamp.OOBSize)
	for t0 := time.Now(); time.Since(t0) < dur; {
		t1 := time.Now()
		k, _ := unix.EpollWait(ep, evs, 0)
		for _, e := range evs[:max(k, 0)] {
			var m int
			if ts {
				m, _, _ = netstamp.RecvFD(int(e.Fd), b, oob)
			} else {
				m, _ = unix.Read(int(e.Fd), b)
			}
			reads++
			bytes += max(m, 0)
		}
		if d := poll - time.Since(t1); d > 0 {
			time.Sleep(d)
		}
	}
	return bytes, reads
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
