package results

import "net/url"

// StripUserinfo returns a URL without its user and password (http://user:pass@host -> http://host),
// for every place a URL is recorded: credentials never reach summary.json, reports, raw files or
// logs. A string that does not parse as a URL is returned as it is.
func StripUserinfo(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}
