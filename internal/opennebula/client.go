// Package opennebula vets GPUs inside OpenNebula VMs: it discovers GPU hosts from the host pool's
// PCI monitoring, creates one VM per host (or per GPU) with the GPUs passed through by PCI address
// and NUMA affinity, runs the ssh backend's path inside each VM, and terminates every VM it made,
// through OpenNebula's XML-RPC API.
package opennebula

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kolo/xmlrpc"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Client speaks OpenNebula's XML-RPC API. Every call carries the session string "user:password",
// which never leaves this struct (not in errors, logs or results).
type Client struct {
	endpoint string
	session  string
	rpc      *xmlrpc.Client
}

// APIError is a call OpenNebula answered with success = false.
type APIError struct {
	Method string
	Code   int
	Msg    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s (error code 0x%x)", e.Method, e.Msg, e.Code)
}

// NoExists is OpenNebula's error code for a resource that does not exist.
const NoExists = 0x400

// Credentials reads "user:password" from the environment variable named env: either the value
// itself or, as OpenNebula's ONE_AUTH does, the path of a file holding it. The secret is never put
// in argv, logs or results.
func Credentials(env string) (string, error) {
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		return "", fmt.Errorf("no OpenNebula credentials: set %s to user:password, or to a file holding it (as ONE_AUTH)", env)
	}
	if !strings.Contains(v, ":") || strings.HasPrefix(v, "/") {
		b, err := os.ReadFile(v)
		if err != nil {
			// The path is the variable's value, which may be a mistyped secret: never in the error.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("%s is neither user:password nor a readable file (%w)", env, err)
		}
		v = strings.TrimSpace(string(b))
	}
	if u, p, ok := strings.Cut(v, ":"); !ok || u == "" || p == "" {
		return "", fmt.Errorf("the credentials in %s are not user:password", env)
	}
	return v, nil
}

// NewClient connects to the XML-RPC endpoint, e.g. http://frontend:2633/RPC2.
func NewClient(endpoint, session string) (*Client, error) {
	if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return nil, fmt.Errorf("opennebula.endpoint %q: want http(s)://frontend:2633/RPC2", endpoint)
	}
	// Its own transport, with a bound on the wait for an answer: a call its context gave up on
	// does not hold a connection forever.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 10 * time.Minute
	c, err := xmlrpc.NewClient(endpoint, boundedTransport{tr, answerLimit})
	if err != nil {
		return nil, err
	}
	return &Client{endpoint: results.RedactURLs(endpoint), session: session, rpc: c}, nil
}

// answerLimit bounds one answer of the front-end (a variable: the tests lower it).
var answerLimit int64 = filelimit.RPCAnswer

// boundedTransport ends an answer past limit bytes with an error: the XML-RPC library reads each
// answer whole into memory, and whatever answers at the endpoint may send without end.
type boundedTransport struct {
	http.RoundTripper
	limit int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, limit: t.limit, left: t.limit}
	}
	return resp, err
}

type boundedBody struct {
	io.ReadCloser
	limit, left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 { // one byte past the bound tells an answer of exactly limit from a longer one
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, fmt.Errorf("its answer is over %s: is opennebula.endpoint the front-end's XML-RPC API (http://frontend:2633/RPC2)?", filelimit.Size(b.limit))
	}
	return n, err
}

// Endpoint is the API URL without user:password@ (it names the front-end in manifests and
// messages; no secret in it).
func (c *Client) Endpoint() string { return c.endpoint }

// Close releases the client.
func (c *Client) Close() error { return c.rpc.Close() }

// call invokes method with the session first and returns the second value of OpenNebula's
// [success, result-or-error, code] answer.
func (c *Client) call(ctx context.Context, method string, args ...any) (any, error) {
	var reply []any
	// The library sends the request (and waits for the answer's headers) inside Go itself, before
	// it returns: the whole call runs apart, so ctx bounds it (the transport's header timeout ends
	// what is left).
	done := make(chan error, 1)
	go func() { done <- c.rpc.Call(method, append([]any{c.session}, args...), &reply) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s", method, scrub(err.Error(), c.session))
	}
	if len(reply) < 2 {
		return nil, fmt.Errorf("%s: malformed answer (%d values, want [success, result, code])", method, len(reply))
	}
	ok, _ := reply[0].(bool)
	if !ok {
		e := &APIError{Method: method, Msg: scrub(fmt.Sprint(reply[1]), c.session)}
		if len(reply) > 2 {
			if n, isInt := reply[2].(int64); isInt {
				e.Code = int(n)
			}
		}
		return nil, e
	}
	return reply[1], nil
}

// scrub removes the session from a message, should a transport error ever echo the request.
func scrub(msg, session string) string {
	if session == "" {
		return msg
	}
	return strings.ReplaceAll(msg, session, "<credentials>")
}

// callAs is call with its result of type T (want names it in the error).
func callAs[T any](ctx context.Context, c *Client, want, method string, args ...any) (T, error) {
	v, err := c.call(ctx, method, args...)
	t, ok := v.(T)
	if err == nil && !ok {
		err = fmt.Errorf("%s: want %s, got %T", method, want, v)
	}
	return t, err
}

func (c *Client) callString(ctx context.Context, method string, args ...any) (string, error) {
	return callAs[string](ctx, c, "an XML document", method, args...)
}

func (c *Client) callInt(ctx context.Context, method string, args ...any) (int, error) {
	n, err := callAs[int64](ctx, c, "an id", method, args...)
	return int(n), err
}

// IsNoExists reports whether err is OpenNebula's "does not exist".
func IsNoExists(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == NoExists
}

// HostPool is one.hostpool.info: every host with its monitoring.
func (c *Client) HostPool(ctx context.Context) ([]HostInfo, error) {
	x, err := c.callString(ctx, "one.hostpool.info")
	if err != nil {
		return nil, err
	}
	return ParseHostPool([]byte(x))
}

// Instantiate is one.template.instantiate(template, name, hold=false, extra, persistent=false).
func (c *Client) Instantiate(ctx context.Context, templateID int, name, extra string) (int, error) {
	return c.callInt(ctx, "one.template.instantiate", templateID, name, false, extra, false)
}

// Allocate is one.vm.allocate(template, hold=false): a VM from a whole template text.
func (c *Client) Allocate(ctx context.Context, template string) (int, error) {
	return c.callInt(ctx, "one.vm.allocate", template, false)
}

// VMInfo is one.vm.info.
func (c *Client) VMInfo(ctx context.Context, id int) (*VM, error) {
	x, err := c.callString(ctx, "one.vm.info", id, false)
	if err != nil {
		return nil, err
	}
	return ParseVM([]byte(x))
}

// VMsNamed lists the caller's VMs (any state but DONE) with this exact name, through
// one.vmpool.info: how `gpuvet clean` finds a VM whose id a killed run never learned.
func (c *Client) VMsNamed(ctx context.Context, name string) ([]VM, error) {
	x, err := c.callString(ctx, "one.vmpool.info", -3, -1, -1, -1)
	if err != nil {
		return nil, err
	}
	all, err := ParseVMPool([]byte(x))
	return slices.DeleteFunc(all, func(v VM) bool { return v.Name != name }), err
}

// Action is one.vm.action (e.g. "terminate-hard").
func (c *Client) Action(ctx context.Context, action string, id int) error {
	_, err := c.call(ctx, "one.vm.action", action, id)
	return err
}

// RecoverDelete is one.vm.recover with operation 3 (delete): the last resort for a VM stuck in a
// state terminate cannot leave.
func (c *Client) RecoverDelete(ctx context.Context, id int) error {
	_, err := c.call(ctx, "one.vm.recover", id, 3)
	return err
}
