package results

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteJSONThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "summary.json")
	in := &Summary{SchemaVersion: SchemaVersion, RunID: "r1", Status: StatusFlag}
	if err := WriteJSON(path, in); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
	out, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.RunID != "r1" || out.Status != StatusFlag {
		t.Fatalf("read back %+v", out)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"))
	if len(left) != 0 {
		t.Fatalf("temp files left behind: %v", left)
	}
}

func TestReadRefusesOtherSchemas(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"notjson":   "{",
		"noversion": `{"run_id":"x"}`,
		"major2":    `{"schema_version":"2.0"}`,
		"minor99":   `{"schema_version":"1.99"}`,
		"semver":    `{"schema_version":"1.0.0"}`,
		"padded":    `{"schema_version":"1.00"}`,
		"bare":      `{"schema_version":"1"}`,
		"spaces":    `{"schema_version":" 1.0"}`,
		"number":    `{"schema_version":1.0}`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := Read(p); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
}

func TestReadAcceptsKnownSchemas(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(p, []byte(`{"schema_version":"`+SchemaVersion+`"}`), 0o644)
	if _, err := Read(p); err != nil {
		t.Fatal(err)
	}
	if !knownVersion("1.0") {
		t.Error("1.0 (the first schema) refused")
	}
}

func TestWorse(t *testing.T) {
	cases := []struct{ a, b, want Status }{
		{StatusOK, StatusFlag, StatusFlag},
		{StatusFailed, StatusFlag, StatusFailed},
		{StatusSkipped, StatusOK, StatusOK},
		{"", StatusSkipped, ""},
	}
	for _, c := range cases {
		if got := Worse(c.a, c.b); got != c.want {
			t.Errorf("Worse(%q,%q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"http://user:s3cret@host:8000/v1":                          "http://host:8000/v1",
		"https://tok@host":                                         "https://host",
		"http://127.0.0.1:8000":                                    "http://127.0.0.1:8000",
		"not a url %":                                              "not a url %",
		"http://h/v1?api_key=CANARY&model=x":                       "http://h/v1?api_key=REDACTED&model=x",
		"https://h/b?X-Amz-Signature=CANARY;sig=CANARY#f":          "https://h/b?X-Amz-Signature=REDACTED;sig=REDACTED#f",
		`Get "http://u:***@h:1/v1/models?token=CANARY": EOF`:       `Get "http://h:1/v1/models?token=REDACTED": EOF`,
		"GET http://user:CANARY@h/nope/v1/models: HTTP 404, then ": "GET http://h/nope/v1/models: HTTP 404, then ",
		"two: http://a:CANARY@x/ and ws://b:CANARY@y/?key=CANARY":  "two: http://x/ and ws://y/?key=REDACTED",
		"a path@ stays: http://h/models/m@rev?k=v":                 "a path@ stays: http://h/models/m@rev?k=v",
	} {
		if got := RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// A summary beyond IndentMaxBytes (a large fleet's) is written compact: indentation would more than
// double it. A small one stays indented, as before.
func TestWriteJSONCompactWhenLarge(t *testing.T) {
	dir := t.TempDir()
	small := &Summary{SchemaVersion: SchemaVersion, RunID: "small", Hosts: []Host{{Name: "a"}}}
	big := &Summary{SchemaVersion: SchemaVersion, RunID: "big"}
	for len(big.Hosts)*60 < IndentMaxBytes+1 {
		big.Hosts = append(big.Hosts, Host{Name: "gpu-node-000000000000000000000", Status: StatusOK})
	}
	for _, c := range []struct {
		s        *Summary
		indented bool
	}{{small, true}, {big, false}} {
		p := filepath.Join(dir, c.s.RunID+".json")
		if err := WriteJSON(p, c.s); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if got := bytes.Contains(b, []byte("\n  \"")); got != c.indented {
			t.Errorf("%s (%d bytes): indented %v, want %v", c.s.RunID, len(b), got, c.indented)
		}
		back, err := Read(p)
		if err != nil || len(back.Hosts) != len(c.s.Hosts) {
			t.Errorf("%s: read back %v", c.s.RunID, err)
		}
	}
}

// Run.Errors print as sorted class=count pairs on every surface, never in Go's map syntax.
func TestErrorCounts(t *testing.T) {
	if got := ErrorCounts(map[string]int{"timeout": 2, "http_500": 5}); got != "http_500=5 timeout=2" {
		t.Errorf("got %q", got)
	}
	if got := ErrorCounts(nil); got != "none" {
		t.Errorf("no errors: %q", got)
	}
}

// A rung's label writes its rate as a number a person reads: 1234.5 req/s is "1235", never "1.23e+03".
func TestRunLabelNoExponent(t *testing.T) {
	for rate, want := range map[float64]string{0.125: "constant 0.125 req/s", 12.345: "constant 12.3 req/s", 123.4: "constant 123 req/s", 1234.5: "constant 1234 req/s", 20000: "constant 20000 req/s"} {
		r := Run{Kind: "constant", TargetRate: rate}
		if got := r.Label(); got != want {
			t.Errorf("rate %v: %q, want %q", rate, got, want)
		}
	}
}
