package dataset

import (
	"strings"
	"testing"
	"time"
)

const mooncakeSample = `{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}
{"timestamp": 27482, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}
{"timestamp": 10535, "input_length": 672, "output_length": 26, "hash_ids": [46, 47]}

{"timestamp": 30000.5, "input_length": 1100, "output_length": 8, "hash_ids": [46, 99, 100]}
`

func TestParseTraceKeepsTimesLengthsAndIDs(t *testing.T) {
	tr, err := ParseTrace([]byte(mooncakeSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Requests) != 4 {
		t.Fatalf("%d requests, want 4", len(tr.Requests))
	}
	// Put in arrival order: the third line (10.535 s) comes second.
	want := []time.Duration{0, 10535 * time.Millisecond, 27482 * time.Millisecond, 30000500 * time.Microsecond}
	for i, r := range tr.Requests {
		if r.At != want[i] {
			t.Errorf("request %d at %v, want %v", i, r.At, want[i])
		}
	}
	if r := tr.Requests[1]; r.Input != 672 || r.Output != 26 || len(r.HashIDs) != 2 {
		t.Errorf("second request %+v", r)
	}
	if tr.Span() != want[3] {
		t.Errorf("span %v", tr.Span())
	}
}

func TestParseTraceNamesTheBadLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\nnot json\n", "line 2: not a JSON object"},
		{`{"input_length": 10, "output_length": 1}`, `line 1: no "timestamp"`},
		{`{"timestamp": -5, "input_length": 10, "output_length": 1}`, "line 1: timestamp -5"},
		{`{"timestamp": 0, "input_length": 0, "output_length": 1}`, `line 1: "input_length" 0`},
		{`{"timestamp": 0, "output_length": 1}`, `line 1: "input_length" missing`},
		{`{"timestamp": 0, "input_length": 10, "output_length": 0}`, `line 1: "output_length" 0`},
		{`{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}`, "line 1: 3 hash_ids for input_length 600"},
		{`{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [-1]}`, "line 1: hash id -1"},
		{"\n\n", "no requests"},
		{`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [` + strings.Repeat("1,", maxTraceLine) + `1]}`, "line 1: "},
	} {
		_, err := ParseTrace([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60q: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestTracePromptsShareTheirHashBlocks(t *testing.T) {
	tr, err := ParseTrace([]byte(mooncakeSample))
	if err != nil {
		t.Fatal(err)
	}
	src := &TraceSource{Trace: tr, Words: &Synthetic{Seed: 7, Exact: true}, Speed: 2}
	for i, r := range tr.Requests {
		p := src.Prompt(i)
		if n := len(strings.Fields(p.Text)); n != r.Input || p.Tokens != r.Input || p.OutputTokens != r.Output {
			t.Errorf("prompt %d: %d words, tokens %d, output %d; want %d words and tokens, output %d", i, n, p.Tokens, p.OutputTokens, r.Input, r.Output)
		}
	}
	a, b, c := strings.Fields(src.Prompt(0).Text), strings.Fields(src.Prompt(1).Text), strings.Fields(src.Prompt(3).Text)
	// Requests 0 and 1 share both blocks (ids 46, 47) up to where the shorter ends (its last word is the anchor).
	if strings.Join(a[:654], " ") != strings.Join(b[:654], " ") {
		t.Error("two prompts with the same hash ids differ in their shared blocks")
	}
	// Request 3 shares block 46 only.
	if strings.Join(a[:512], " ") != strings.Join(c[:512], " ") || strings.Join(a[512:600], " ") == strings.Join(c[512:600], " ") {
		t.Error("a prompt sharing only its first hash id does not share exactly that block")
	}
	if src.Arrival(2) != 27482*time.Millisecond/2 {
		t.Errorf("arrival at speed 2: %v", src.Arrival(2))
	}
	if b := src.PrefixBlocks(3); len(b) != 3 || b[1] != (PrefixBlock{99, 512}) || b[2] != (PrefixBlock{100, 1100 - 1024}) {
		t.Errorf("prefix blocks %v", b)
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(mooncakeSample))
	f.Add([]byte(`{"timestamp": 1e300, "input_length": 1, "output_length": 1}`))
	f.Add([]byte(`{"timestamp": 0, "input_length": 4194304, "output_length": 1048576, "hash_ids": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseTrace(b)
		if err != nil {
			return
		}
		last := time.Duration(0)
		for i, r := range tr.Requests {
			if r.At < last || r.Input < 1 || r.Output < 1 || len(r.HashIDs) > (r.Input+TraceBlockTokens-1)/TraceBlockTokens {
				t.Fatalf("request %d accepted: %+v", i, r)
			}
			last = r.At
		}
		if tr.Requests[0].At != 0 {
			t.Fatalf("first request at %v", tr.Requests[0].At)
		}
		src := &TraceSource{Trace: tr, Words: &Synthetic{Seed: 1, Exact: true}}
		if tr.Requests[0].Input < 5000 {
			if p := src.Prompt(0); len(strings.Fields(p.Text)) != tr.Requests[0].Input {
				t.Fatalf("prompt of %d words for input %d", len(strings.Fields(p.Text)), tr.Requests[0].Input)
			}
		}
	})
}
