// Package ssh runs gpuvet on remote hosts over SSH: it connects with the user's agent and key files
// (honouring the basics of ~/.ssh/config), checks host keys against known_hosts, copies the gpuvet
// binary over, runs the host pipeline there, streams its progress back, collects the results and
// removes everything it put on the host.
package ssh

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Target is one host as gpuvet reaches it: the name the user gave and what ~/.ssh/config and the
// inventory resolve it to.
type Target struct {
	Name          string   // as given (an alias, a host name or an address); names the host in results
	Host          string   // the address dialled (ssh_config HostName, else Name)
	Port          int      // default 22
	User          string   // default: the local user
	IdentityFiles []string // key files to offer after the agent's keys
}

// Addr is host:port.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// Options are the client-side settings shared by every host of a run.
type Options struct {
	// ConfigFile is the ssh_config read for HostName, User, Port and IdentityFile (default
	// ~/.ssh/config, missing is fine); KnownHosts the files host keys are always checked against
	// (default ~/.ssh/known_hosts): an unknown or changed key fails the host.
	ConfigFile string
	KnownHosts []string
	// AgentSocket is the ssh-agent socket (default $SSH_AUTH_SOCK; empty: no agent).
	AgentSocket string
	// IdentityFile, User and Port apply when neither the inventory nor ssh_config set them.
	IdentityFile, User string
	Port               int
	// AcceptNew trusts a host key that is not in known_hosts yet and appends it to KnownHosts[0]
	// (OpenSSH's StrictHostKeyChecking=accept-new); a changed key is still refused. Only for VMs
	// gpuvet has just created, whose keys no one could have known before.
	AcceptNew bool
	// ConnectTimeout bounds the TCP connect and the SSH handshake (default 15 s).
	ConnectTimeout time.Duration
	// fromManifest: the host is named only by a run manifest (gpuvet clean): an unknown key gets
	// no advice to trust it.
	fromManifest bool
}

// defaultPath is ~/.ssh/name ("" without a home).
func defaultPath(name string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".ssh", name)
}

// Resolve fills a Target from the name and ssh_config. Values already set in t (from an inventory)
// win over ssh_config, which wins over o's defaults.
func Resolve(t Target, o Options) (Target, error) {
	cfgPath := cmp.Or(o.ConfigFile, defaultPath("config"))
	var cfg *ssh_config.Config
	if b, err := os.ReadFile(cfgPath); err == nil {
		cfg, err = ssh_config.DecodeBytes(b)
		if err != nil {
			return t, fmt.Errorf("%s: %w (fix the file or point ssh.config_file elsewhere)", cfgPath, err)
		}
	} else if o.ConfigFile != "" {
		return t, fmt.Errorf("ssh config %s: %w", cfgPath, err)
	}
	get := func(key string) string {
		if cfg == nil {
			return ""
		}
		v, _ := cfg.Get(t.Name, key)
		return v
	}
	t.Host = cmp.Or(t.Host, get("HostName"), t.Name)
	t.User = cmp.Or(t.User, get("User"), o.User)
	if t.User == "" {
		u, err := localUser()
		if err != nil {
			return t, fmt.Errorf("host %s: no SSH user: $USER is unset and %w: set ssh.user (or User in ssh_config, user in the inventory)", t.Name, err)
		}
		t.User = u
	}
	if t.Port == 0 {
		if p := get("Port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return t, fmt.Errorf("%s: host %s: Port %q is not a port number", cfgPath, t.Name, p)
			}
			t.Port = n
		}
	}
	t.Port = cmp.Or(t.Port, o.Port, 22)
	if len(t.IdentityFiles) == 0 && cfg != nil {
		all, _ := cfg.GetAll(t.Name, "IdentityFile")
		for _, f := range all {
			if f != "" && !strings.HasSuffix(f, "/identity") { // ssh_config's built-in default entry
				t.IdentityFiles = append(t.IdentityFiles, expandHome(f))
			}
		}
	}
	if len(t.IdentityFiles) == 0 && o.IdentityFile != "" {
		t.IdentityFiles = IdentityFiles(o.IdentityFile)
	}
	return t, nil
}

// localUser is the user gpuvet logs in as when nothing names one, as ssh does: $USER, else the
// account this process runs as (cron, systemd units and containers often have no $USER).
func localUser() (string, error) {
	if u := os.Getenv("USER"); u != "" {
		return u, nil
	}
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("the current user is unknown (%w)", err)
	}
	if u.Username == "" {
		return "", fmt.Errorf("the current user (uid %s) has no name", u.Uid)
	}
	return u.Username, nil
}

// IdentityFiles are the key files gpuvet offers (ssh and opennebula): the one configured
// (ssh.identity_file, ~ expanded), else OpenSSH's defaults (~/.ssh/id_ed25519, id_ecdsa, id_rsa).
func IdentityFiles(configured string) []string {
	if configured != "" {
		return []string{expandHome(configured)}
	}
	var out []string
	for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		out = append(out, defaultPath(n))
	}
	return out
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// Failure kinds: why a host could not be reached, named in its error.
var (
	ErrUnreachable = errors.New("unreachable")
	ErrAuth        = errors.New("authentication refused")
	ErrHostKey     = errors.New("host key not trusted")
)

// Dial connects to t: agent keys first, then key files; the host key must be in known_hosts.
func Dial(ctx context.Context, t Target, o Options) (*gossh.Client, error) {
	files := o.KnownHosts
	if len(files) == 0 {
		files = []string{defaultPath("known_hosts")}
	}
	if o.AcceptNew {
		f, err := os.OpenFile(files[0], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("known_hosts %s: %w", files[0], err)
		}
		f.Close()
	}
	var existing []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			existing = append(existing, f)
		}
	}
	if len(existing) == 0 && o.fromManifest {
		return nil, manifestHostErr(t)
	}
	if len(existing) == 0 {
		return nil, fmt.Errorf("%w: no known_hosts file (%s): add the host's key with `ssh-keyscan -p %d %s >> ~/.ssh/known_hosts` after checking its fingerprint", ErrHostKey, strings.Join(files, ", "), t.Port, t.Host)
	}
	check, err := knownhosts.New(existing...)
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	// The known key types, read before acceptNew wraps the check (it would write the probe down).
	algos := knownAlgorithms(check, t)
	if o.AcceptNew {
		check = acceptNew(check, files[0])
	}
	auths, closeAgent := authMethods(t, o)
	defer closeAgent()
	if len(auths) == 0 {
		return nil, fmt.Errorf("%w: no SSH key: no agent ($SSH_AUTH_SOCK) and no readable unencrypted key file (%s)", ErrAuth, strings.Join(keyFiles(t), ", "))
	}
	timeout := fleet.OrDefault(o.ConnectTimeout, 15*time.Second)
	// Ask for the host key types known_hosts holds for this host, as OpenSSH does: a host that also
	// offers a type we do not know it by (ecdsa beside a known ed25519) is not an attacker.
	cfg := &gossh.ClientConfig{User: t.User, Auth: auths, HostKeyCallback: check, Timeout: timeout,
		HostKeyAlgorithms: algos}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", t.Addr())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, t.Addr(), err)
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c, chans, reqs, err := gossh.NewClientConn(conn, t.Addr(), cfg)
	if err != nil {
		conn.Close()
		var ke *knownhosts.KeyError
		if o.fromManifest && errors.As(err, &ke) && len(ke.Want) == 0 {
			return nil, manifestHostErr(t)
		}
		return nil, classify(t, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return gossh.NewClient(c, chans, reqs), nil
}

// manifestHostErr is an unknown host key of a host only a run manifest names: no advice to
// trust it (a manifest is a file anyone may have edited).
func manifestHostErr(t Target) error {
	return fmt.Errorf("%w: %s is not in known_hosts and only a run manifest names it: gpuvet does not log in to a host a file names; if the run was yours, clean with the known_hosts it used (ssh.known_hosts)", ErrHostKey, t.Addr())
}

// classify turns a handshake error into one of the failure kinds with what to do.
func classify(t Target, err error) error {
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) {
		if len(ke.Want) == 0 {
			return fmt.Errorf("%w: %s is not in known_hosts: add its key with `ssh-keyscan -p %d %s >> ~/.ssh/known_hosts` after checking its fingerprint", ErrHostKey, t.Addr(), t.Port, t.Host)
		}
		return fmt.Errorf("%w: %s offered a key that does not match known_hosts (%s:%d): the host was reinstalled or someone is in the middle; check, then fix known_hosts", ErrHostKey, t.Addr(), ke.Want[0].Filename, ke.Want[0].Line)
	}
	var re *knownhosts.RevokedError
	if errors.As(err, &re) {
		return fmt.Errorf("%w: %s offered a revoked key", ErrHostKey, t.Addr())
	}
	if strings.Contains(err.Error(), "unable to authenticate") {
		return fmt.Errorf("%w: %s@%s refused every key offered (agent and %s): install your public key in the host's authorized_keys", ErrAuth, t.User, t.Addr(), strings.Join(keyFiles(t), ", "))
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, t.Addr(), err)
}

func keyFiles(t Target) []string {
	if len(t.IdentityFiles) > 0 {
		return t.IdentityFiles
	}
	return IdentityFiles("")
}

// authMethods offers the agent's keys, then the unencrypted key files that exist. Encrypted key
// files are left to the agent (gpuvet never asks for a passphrase).
func authMethods(t Target, o Options) ([]gossh.AuthMethod, func()) {
	var signers []gossh.Signer
	closeFn := func() {}
	if sock := cmp.Or(o.AgentSocket, os.Getenv("SSH_AUTH_SOCK")); sock != "" {
		if conn, err := net.Dial("unix", sock); err == nil {
			closeFn = func() { conn.Close() }
			if s, err := agent.NewClient(conn).Signers(); err == nil {
				signers = append(signers, s...)
			}
		}
	}
	for _, f := range keyFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if s, err := gossh.ParsePrivateKey(b); err == nil {
			signers = append(signers, s)
		}
	}
	if len(signers) == 0 {
		return nil, closeFn
	}
	return []gossh.AuthMethod{gossh.PublicKeys(signers...)}, closeFn
}

// acceptNew wraps a known_hosts check: an unknown key is appended to file and trusted; a key that
// differs from a known one is still an error.
func acceptNew(check gossh.HostKeyCallback, file string) gossh.HostKeyCallback {
	return func(host string, remote net.Addr, key gossh.PublicKey) error {
		err := check(host, remote, key)
		var ke *knownhosts.KeyError
		if err == nil || !errors.As(err, &ke) || len(ke.Want) > 0 {
			return err
		}
		f, ferr := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0o600)
		if ferr != nil {
			return ferr
		}
		defer f.Close()
		_, ferr = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(host)}, key))
		return ferr
	}
}

// knownAlgorithms lists the host key algorithms of the keys known_hosts holds for t, in
// known_hosts order (nil: none known, the library's defaults apply). knownhosts answers a key it
// does not know with the keys it knows for that host: a probe key asks for them.
func knownAlgorithms(check gossh.HostKeyCallback, t Target) []string {
	probe, err := gossh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	if err != nil {
		return nil
	}
	var remote net.Addr = &net.TCPAddr{IP: net.IPv4zero, Port: t.Port}
	if ip := net.ParseIP(t.Host); ip != nil {
		remote = &net.TCPAddr{IP: ip, Port: t.Port}
	}
	var ke *knownhosts.KeyError
	if err := check(t.Addr(), remote, probe); !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var out []string
	for _, k := range ke.Want {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// algorithmsFor maps a key type to the signature algorithms that use it (an RSA key signs with
// SHA-2 first, as OpenSSH prefers).
func algorithmsFor(keyType string) []string {
	if keyType == gossh.KeyAlgoRSA {
		return []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
	}
	return []string{keyType}
}
