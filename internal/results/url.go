package results

import (
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"strings"
)

// RedactURLs is gpuvet's one redaction of URLs, for everything it writes. In every URL of s it
// removes the user and password (Go's own "user:***@" too) and replaces the value of every key-like
// query parameter (api_key, token, sig, secret, password, X-Amz-Credential, …) with REDACTED; the
// rest of s is left as it is.
func RedactURLs(s string) string {
	return urlRe.ReplaceAllStringFunc(s, func(u string) string {
		u = userinfoRe.ReplaceAllString(u, "$1")
		return secretParamRe.ReplaceAllString(u, "${1}REDACTED")
	})
}

var (
	// urlRe finds a URL in text: a scheme, "://", and everything up to a space or a quote.
	urlRe = regexp.MustCompile("(?i)\\b[a-z][a-z0-9+.\\-]*://[^\\s\"'<>`]+")
	// userinfoRe is a URL's scheme and user info (up to the authority's last "@").
	userinfoRe = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.\-]*://)[^/?#]*@`)
	// secretParamRe is a query parameter whose name says it holds a secret, up to its value.
	secretParamRe = regexp.MustCompile(`(?i)([?&;][a-z0-9_.\-]*(?:key|token|secret|passw|sig|credential|auth)[a-z0-9_.\-]*=)[^&#;\s]*`)
)

// JoinURL is an OpenAI-compatible server's path p under its base URL, for every client of gpuvet:
// a trailing "/" and "/v1" of the base's path go, its query stays (a gateway that wants
// ?api-version=… gets it on every request), a fragment goes.
func JoinURL(base, p string) string {
	u, err := url.Parse(base)
	if err != nil {
		return strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1") + p
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1") + p
	u.RawPath, u.Fragment = "", ""
	return u.String()
}

// ModelMaxLen reads a /v1/models answer (at most 1 MiB of it) for the context length the server
// gives model (vLLM's and SGLang's max_model_len); 0 when it does not say or says something
// out of bounds.
func ModelMaxLen(body io.Reader, model string) int {
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&list) != nil {
		return 0
	}
	for _, m := range list.Data {
		if m.ID == model && m.MaxModelLen > 0 && m.MaxModelLen <= 1<<22 {
			return m.MaxModelLen
		}
	}
	return 0
}
