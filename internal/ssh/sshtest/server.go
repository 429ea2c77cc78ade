// Package sshtest is an SSH server on loopback for tests: it accepts the given public keys and runs
// each exec request with `sh -c` on this machine, in the server's own folder (one server plays one
// host), with signals and exit statuses delivered as sshd does.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Server is one fake host.
type Server struct {
	Dir     string   // the host's folder: commands start here, HOME points here
	Env     []string // extra environment for every command
	Addr    string   // 127.0.0.1:port
	HostKey gossh.PublicKey

	ln    net.Listener
	cfg   *gossh.ServerConfig
	mu    sync.Mutex
	conns map[net.Conn]bool
	procs map[*exec.Cmd]bool
	wg    sync.WaitGroup
}

// NewKey makes an ed25519 key pair and writes the private key, OpenSSH format, to path.
func NewKey(path string) (gossh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	return gossh.NewPublicKey(pub)
}

// Start listens on a free loopback port and serves until Close. Only the authorized keys log in.
func Start(dir string, authorized ...gossh.PublicKey) (*Server, error) {
	return StartAt("127.0.0.1:0", dir, authorized...)
}

// StartAt is Start on a given address (e.g. 127.0.0.3:2222: several hosts on one port, as VMs).
func StartAt(addr, dir string, authorized ...gossh.PublicKey) (*Server, error) {
	_, hpriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := gossh.NewSignerFromKey(hpriv)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, HostKey: signer.PublicKey(), conns: map[net.Conn]bool{}, procs: map[*exec.Cmd]bool{}}
	s.cfg = &gossh.ServerConfig{PublicKeyCallback: func(_ gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
		for _, a := range authorized {
			if string(a.Marshal()) == string(k.Marshal()) {
				return nil, nil
			}
		}
		return nil, fmt.Errorf("key not authorized")
	}}
	s.cfg.AddHostKey(signer)
	if s.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, err
	}
	s.Addr = s.ln.Addr().String()
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Port is the listening port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// KnownHostsLine is this server's known_hosts entry (with key, or another key to play a changed host).
func (s *Server) KnownHostsLine(key gossh.PublicKey) string {
	if key == nil {
		key = s.HostKey
	}
	return knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, key)
}

// Close stops listening, drops every connection and kills every command still running.
func (s *Server) Close() {
	s.ln.Close()
	s.DropConnections()
	s.wg.Wait()
}

// DropConnections cuts every client connection and kills their commands: the host "dies".
func (s *Server) DropConnections() {
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	for p := range s.procs {
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
	}
	s.mu.Unlock()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	_, chans, reqs, err := gossh.NewServerConn(c, s.cfg)
	if err != nil {
		return
	}
	go gossh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(gossh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(ch, creqs)
	}
}

// session runs one exec request: stdin, stdout, stderr wired; signal requests go to the command's
// process group; the exit status goes back as sshd sends it.
func (s *Server) session(ch gossh.Channel, reqs <-chan *gossh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	done := make(chan struct{})
	for req := range reqs {
		switch req.Type {
		case "env":
			_ = req.Reply(true, nil)
		case "exec":
			if cmd != nil {
				_ = req.Reply(false, nil)
				continue
			}
			var p struct{ Command string }
			if err := gossh.Unmarshal(req.Payload, &p); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			cmd = exec.Command("sh", "-c", p.Command)
			cmd.Dir = s.Dir
			cmd.Env = append(append(os.Environ(), "HOME="+s.Dir), s.Env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, _ := cmd.StdinPipe()
			cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
			if err := cmd.Start(); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			s.track(cmd, true)
			_ = req.Reply(true, nil)
			go func() { _, _ = io.Copy(stdin, ch); stdin.Close() }()
			go func() {
				err := cmd.Wait()
				s.track(cmd, false)
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
					if code < 0 {
						code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
					}
				}
				b := make([]byte, 4)
				binary.BigEndian.PutUint32(b, uint32(code))
				_, _ = ch.SendRequest("exit-status", false, b)
				ch.Close()
				close(done)
			}()
		case "signal":
			var p struct{ Signal string }
			if cmd != nil && gossh.Unmarshal(req.Payload, &p) == nil && cmd.Process != nil {
				if sig, ok := signals[p.Signal]; ok {
					_ = syscall.Kill(-cmd.Process.Pid, sig)
				}
			}
			_ = req.Reply(true, nil)
		default:
			_ = req.Reply(false, nil)
		}
	}
	if cmd != nil {
		select {
		case <-done:
		default:
			// The client went away with the command still running: its output pipe is gone, so
			// (as under sshd, where the next write gets SIGPIPE) the command dies.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP}

func (s *Server) track(c *exec.Cmd, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.procs[c] = true
	} else {
		delete(s.procs, c)
	}
}

// Files lists every path under the host's folder (relative), for "nothing left" checks.
func (s *Server) Files() []string {
	var out []string
	_ = filepath.Walk(s.Dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil && p != s.Dir {
			rel, _ := filepath.Rel(s.Dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}
