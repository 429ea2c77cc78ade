// Package sshdtest starts real OpenSSH servers (Debian's openssh-server) on loopback for tests:
// one sshd per host, each on its own address (127.0.0.x) and port, with its own config and host
// keys of all three types (ed25519, ecdsa, rsa) made by ssh-keygen, and an authorized_keys of the
// test's key. It needs /usr/sbin/sshd and root (sshd's privilege separation); without them the test
// skips and says what to install.
package sshdtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// KeyTypes are the host key types every sshd gets, in the order sshd is given them.
var KeyTypes = []string{"ed25519", "ecdsa", "rsa"}

// SSHD is one real sshd playing one host.
type SSHD struct {
	Host string // 127.0.0.x
	Port int
	Dir  string // its config, keys and log
	// HostKeys are the host's public keys by type ("ed25519" → "ssh-ed25519 AAAA…").
	HostKeys map[string]string

	cmd *exec.Cmd
	log *lockedBuffer
	// nsPid is the chrooted sshd's pid (as seen from here) when it runs in a PID namespace of its
	// own (Options.Root and util-linux's unshare); 0 otherwise.
	nsPid int
}

// NamespacePid is the pid (as seen from here) of a chrooted sshd that runs in a PID and mount
// namespace of its own, for nsenter; 0 when it shares this one.
func (s *SSHD) NamespacePid() int { return s.nsPid }

// Addr is host:port.
func (s *SSHD) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// KnownHostsLines are known_hosts entries for this host with the key types asked for (none: all).
func (s *SSHD) KnownHostsLines(types ...string) string {
	if len(types) == 0 {
		types = KeyTypes
	}
	var b strings.Builder
	for _, t := range types {
		fmt.Fprintf(&b, "[%s]:%d %s\n", s.Host, s.Port, s.HostKeys[t])
	}
	return b.String()
}

// Log is what sshd wrote (-e: to stderr) so far.
func (s *SSHD) Log() string { return s.log.String() }

// Binary is the sshd found, or an error saying why tests cannot use one.
func Binary() (string, error) {
	p, err := exec.LookPath("sshd")
	if err != nil {
		p = "/usr/sbin/sshd"
		if _, serr := os.Stat(p); serr != nil {
			return "", fmt.Errorf("no sshd (install Debian's openssh-server: apt-get install openssh-server)")
		}
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("sshd needs root for privilege separation (these tests log in as root)")
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		return "", fmt.Errorf("no ssh-keygen (install openssh-client)")
	}
	return p, nil
}

// Options shape one sshd.
type Options struct {
	// SetEnv is passed to sshd_config's SetEnv: the environment of every session.
	SetEnv []string
	// Authorized is the authorized_keys content (the test key's public line).
	Authorized string
	// Port is the port to listen on (0: a free one). VMs share one port on their own addresses.
	Port int
	// Root runs the root's own sshd chrooted into it (a Debian root made by debootstrap, with
	// openssh-server): a host whose files, packages and apt are its own. "": this machine's sshd.
	Root string
}

// Start starts an sshd on host (e.g. "127.0.0.2") and a free port, stopped at the test's end. The
// test skips when no sshd can be used, and under -short (a real process: the fast loop leaves it out).
func Start(t testing.TB, host string, o Options) *SSHD {
	t.Helper()
	if testing.Short() {
		t.Skip("a real sshd: end to end, go test without -short runs it")
	}
	bin, err := Binary()
	if err != nil {
		t.Skipf("real sshd tests skipped: %v", err)
	}
	if o.Root != "" {
		bin = "/usr/sbin/sshd"
		if _, err := os.Stat(filepath.Join(o.Root, bin)); err != nil {
			t.Skipf("real sshd tests skipped: no %s in the root %s (debootstrap --include=openssh-server)", bin, o.Root)
		}
	}
	if err := os.MkdirAll(filepath.Join(o.Root, "/run/sshd"), 0o755); err != nil { // sshd's privilege separation dir
		t.Skipf("real sshd tests skipped: /run/sshd: %v", err)
	}
	tmp := ""
	if o.Root != "" {
		tmp = filepath.Join(o.Root, "tmp")
	}
	dir, err := os.MkdirTemp(tmp, "sshd-"+host+"-")
	if err != nil {
		t.Fatal(err)
	}
	// in names a file of dir as the sshd sees it (inside the root).
	in := func(p string) string { return "/" + strings.TrimPrefix(strings.TrimPrefix(p, o.Root), "/") }
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &SSHD{Host: host, Dir: dir, HostKeys: map[string]string{}, log: &lockedBuffer{}}
	var hostKeys []string
	for _, kt := range KeyTypes {
		f := filepath.Join(dir, "ssh_host_"+kt+"_key")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", kt, "-N", "", "-f", f).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen -t %s: %v %s", kt, err, out)
		}
		pub, err := os.ReadFile(f + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		fs := strings.Fields(string(pub))
		s.HostKeys[kt] = fs[0] + " " + fs[1]
		hostKeys = append(hostKeys, "HostKey "+in(f))
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(o.Authorized+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		port, err := o.Port, error(nil)
		if port == 0 {
			port, err = freePort(host)
		}
		if err != nil {
			t.Skipf("real sshd tests skipped: no address %s: %v", host, err)
		}
		s.Port = port
		cfg := []string{
			"Port " + strconv.Itoa(port), "ListenAddress " + host, strings.Join(hostKeys, "\n"),
			"AuthorizedKeysFile " + in(filepath.Join(dir, "authorized_keys")), "StrictModes no",
			"PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
			"PermitRootLogin prohibit-password", "PidFile " + in(filepath.Join(dir, "sshd.pid")),
			"MaxStartups 100:30:200", "MaxSessions 100", "LogLevel VERBOSE", "Subsystem sftp internal-sftp",
		}
		if len(o.SetEnv) > 0 {
			cfg = append(cfg, "SetEnv "+strings.Join(o.SetEnv, " "))
		}
		conf := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(conf, []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(bin, "-D", "-e", "-f", conf)
		if o.Root != "" {
			s.cmd = exec.Command("chroot", o.Root, bin, "-D", "-e", "-f", in(conf))
			// A PID namespace and /proc of its own, where util-linux's unshare is found: a host's
			// processes are its own, as on a real machine (host preparation looks for a running
			// nv-hostengine, and another test's chroot host may run one at the same time).
			if u, err := exec.LookPath("unshare"); err == nil {
				s.cmd = exec.Command(u, append([]string{"--pid", "--kill-child", "--mount-proc=" + filepath.Join(o.Root, "proc"), "chroot", o.Root}, bin, "-D", "-e", "-f", in(conf))...)
			}
		}
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("start sshd: %v", err)
		}
		if waitListening(s.Addr(), 10*time.Second) {
			if filepath.Base(s.cmd.Path) == "unshare" {
				s.nsPid = firstChild(s.cmd.Process.Pid)
			}
			break
		}
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		if attempt == 3 || o.Port != 0 {
			t.Fatalf("sshd on %s did not start:\n%s", s.Addr(), s.Log())
		}
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the sshd (its session children end when their connections drop).
func (s *SSHD) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(addr string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			// sshd sends its banner first: a listener that answers with one is sshd.
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			b := make([]byte, 4)
			_, err := io.ReadFull(c, b)
			c.Close()
			if err == nil && string(b) == "SSH-" {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Proxy forwards TCP connections from its own address to target, and can cut them all (a dropped
// connection while the host stays up).
type Proxy struct {
	Addr string
	ln   net.Listener
	mu   sync.Mutex
	conn []net.Conn
}

// StartProxy listens on host:0 and forwards to target, until the test ends.
func StartProxy(t testing.TB, host, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conn = append(p.conn, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.Drop() })
	return p
}

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Drop cuts every connection made so far; new ones still get through.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conn {
		c.Close()
	}
	p.conn = nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// firstChild is pid's first child process (0: none), from /proc/PID/task/PID/children.
func firstChild(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}
