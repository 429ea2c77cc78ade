package results

import (
	"strings"
	"testing"
)

// FuzzRedactURLs: whatever the text, a password in a URL's user info never survives.
func FuzzRedactURLs(f *testing.F) {
	f.Add("http://user:CANARY@host/v1?api_key=CANARY", "x")
	f.Fuzz(func(t *testing.T, pre, host string) {
		if strings.ContainsAny(host, "@/?#\"\\' <>`\t\n\r\f\v") || host == "" {
			return
		}
		out := RedactURLs(pre + " http://user:CANARY@" + host + "/p?token=CANARY ")
		if strings.Contains(out, "CANARY") && !strings.Contains(pre, "CANARY") && !strings.Contains(host, "CANARY") {
			t.Fatalf("%q", out)
		}
	})
}
