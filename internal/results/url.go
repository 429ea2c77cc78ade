package results

import "regexp"

// RedactURLs is gpuvet's one redaction of URLs, for everything it writes: messages, errors,
// summary.json, reports, raw files, logs. In every URL of s it removes the user and password
// (http://user:pass@host → http://host; Go's own "user:***@" too) and replaces the value of every
// key-like query parameter (api_key, key, token, access_token, sig, signature, secret, password,
// X-Amz-Credential, …) with REDACTED; the rest of s is left as it is. A URL alone is a text with
// one URL in it.
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
