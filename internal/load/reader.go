package load

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
)

// Readers of streamed responses (LoadConfig.Reader, config key load.reader, flag --reader).
const (
	// ReaderAuto: the event loop for plain-http endpoints on Linux reached without a proxy, else net/http.
	ReaderAuto = "auto"
	// ReaderEventLoop: the event loop, or an error where it cannot be used.
	ReaderEventLoop = "eventloop"
	// ReaderNetHTTP: net/http, one goroutine per stream (the reference the event loop is tested against).
	ReaderNetHTTP = "nethttp"
)

// Readers are the accepted values of LoadConfig.Reader.
var Readers = []string{ReaderAuto, ReaderEventLoop, ReaderNetHTTP}

// proxyFor is the proxy net/http's transport would use (the environment, read once per process).
var proxyFor = http.ProxyFromEnvironment

// endpointURL is what the event-loop reader needs of a completions URL.
type endpointURL struct {
	addr string // host:port to dial
	host string // the Host header, as net/http sends it
	uri  string // the request target
}

// loopEndpoint says whether the event loop can serve rawURL; TLS, a proxy, credentials go to net/http.
func loopEndpoint(rawURL string) (endpointURL, string) {
	u, err := url.Parse(rawURL)
	switch {
	case !eventLoopBuilt:
		return endpointURL{}, "the event-loop reader is built on Linux only (" + runtime.GOOS + ")"
	case err != nil:
		return endpointURL{}, err.Error()
	case u.Scheme != "http":
		return endpointURL{}, "a " + u.Scheme + " endpoint: TLS is read by net/http"
	case u.User != nil:
		return endpointURL{}, "credentials in the URL: net/http sends them"
	}
	if p, err := proxyFor(&http.Request{URL: u}); err != nil || p != nil {
		return endpointURL{}, "a proxy from the environment ($HTTP_PROXY/$NO_PROXY): net/http goes through it"
	}
	return endpointURL{addr: net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "80")), host: u.Host, uri: u.RequestURI()}, ""
}

// pickReader chooses a load's reader (ok: the event loop at ep; else why). One asked for must be usable.
func pickReader(setting, completionsURL string) (ep endpointURL, ok bool, why string, err error) {
	ep, not := loopEndpoint(completionsURL)
	switch {
	case setting == ReaderNetHTTP:
		return ep, false, "net/http (one goroutine per stream): asked for with reader nethttp", nil
	case not == "":
		return ep, true, "", nil
	case setting == ReaderEventLoop:
		return ep, false, "", fmt.Errorf("--reader eventloop (load.reader): cannot be used here: %s; use auto or nethttp", not)
	}
	return ep, false, "net/http (one goroutine per stream): " + not, nil
}
