package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzOutsideText puts arbitrary text where a summary carries outside input (host and model names,
// flag reasons, functional details) and checks every output keeps its structure: the HTML gains no
// element, JUnit stays well-formed XML with the reason intact, the Prometheus file still parses with
// the label value intact.
func FuzzOutsideText(f *testing.F) {
	for _, seed := range []string{"gpu-node-01", `<script>alert(1)</script>`, `a"b\c` + "\nd", "]]>", "\x00\xff\xfe", "{{.}}", "</svg><svg>", "é 日本 🚀"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s := readSample(t)
		s.Hosts[0].Name = text
		s.Hosts[0].Models[0].Model = text
		s.Hosts[0].Models[0].Endpoints[1].Functional.Tests[2].Detail = text
		s.Hosts[0].Health.GPUs[3].Flags[0].Reason = text
		var h bytes.Buffer
		if err := RenderHTML(s, &h); err != nil {
			t.Fatal(err)
		}
		out := h.String()
		if n := strings.Count(out, "<svg class=\"chart\""); n != 5 {
			t.Errorf("%d charts, want 5", n)
		}
		if strings.Contains(out, "<script") {
			t.Error("text became a script element")
		}
		if strings.Count(out, "<details") != 4 || strings.Count(out, "</html>") != 1 {
			t.Logf("details=%d html=%d", strings.Count(out, "<details"), strings.Count(out, "</html>"))
			t.Error("text changed the page structure")
		}
		j, err := JUnit(s)
		if err != nil {
			t.Fatal(err)
		}
		doc := parseJUnit(t, j)
		if utf8.ValidString(text) && !strings.ContainsAny(text, "\x00\r") && isXMLText(text) {
			found := false
			for _, su := range doc.Suites {
				for _, c := range su.Cases {
					if c.Failure != nil && strings.Contains(c.Failure.Message, text) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("reason %q lost in JUnit", text)
			}
		}
		p, err := Prometheus(s)
		if err != nil {
			t.Fatal(err)
		}
		fams := parseProm(t, p)
		if utf8.ValidString(text) {
			if v := gauge(t, fams, "gpuvet_model_status", map[string]string{"model": text}); v != 1 {
				t.Errorf("model status %v", v)
			}
		}
	})
}

// isXMLText reports whether every rune of s may appear in XML character data.
func isXMLText(s string) bool {
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r <= 0xDFFF) {
			return false
		}
	}
	return true
}
