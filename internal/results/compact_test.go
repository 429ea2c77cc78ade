package results

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// spare sums the bytes of spare capacity in every slice under v.
func spare(v reflect.Value) int {
	n := 0
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			n += spare(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			n += spare(v.Field(i))
		}
	case reflect.Slice:
		n += (v.Cap() - v.Len()) * int(v.Type().Elem().Size())
		for i := range v.Len() {
			n += spare(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			n += spare(it.Value())
		}
	}
	return n
}

// A summary read back holds no spare slice capacity (the decoder's doubling left a third of a
// node's slices' bytes unused), one copy of a text its hosts repeat, and the same values as decoded.
func TestParseCompacts(t *testing.T) {
	s := Summary{SchemaVersion: SchemaVersion, RunID: "r"}
	for h := range 3 {
		host := Host{Name: fmt.Sprintf("node-%d", h)}
		ep := Endpoint{Load: &Load{}}
		for r := range 9 { // 9 rungs: the decoder's slice grows to 16
			ep.Load.Runs = append(ep.Load.Runs, Run{Kind: "constant", TargetRate: float64(r), Errors: map[string]int{"timeout": r},
				ErrorSamples: []ErrorSample{{Class: "timeout"}, {Class: "http_500"}, {Class: "connect"}}})
		}
		host.Models = []Model{{Model: "m", Endpoints: []Endpoint{ep, ep, ep}}}
		s.Hosts = append(s.Hosts, host)
	}
	s.Meta.Thresholds = map[string]Threshold{"gate.ttft_p95_ms": {}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var plain Summary
	if err := json.Unmarshal(b, &plain); err != nil {
		t.Fatal(err)
	}
	if spare(reflect.ValueOf(plain)) == 0 {
		t.Fatal("the plain decode left no spare capacity: this test shows nothing")
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if n := spare(reflect.ValueOf(got)); n != 0 {
		t.Errorf("Parse left %d bytes of spare slice capacity", n)
	}
	if !reflect.DeepEqual(*got, plain) {
		t.Error("Parse changed the values it fitted")
	}
	a, b2 := got.Hosts[0].Models[0].Endpoints[0].Load.Runs[0].Kind, got.Hosts[2].Models[0].Endpoints[1].Load.Runs[3].Kind
	if unsafe.StringData(a) != unsafe.StringData(b2) {
		t.Error("two hosts' equal strings hold two copies of their bytes")
	}
	if p, q := unsafe.StringData(plain.Hosts[0].Models[0].Endpoints[0].Load.Runs[0].Kind), unsafe.StringData(plain.Hosts[2].Models[0].Endpoints[1].Load.Runs[3].Kind); p == q {
		t.Error("the plain decode shared the strings already: this test shows nothing")
	}
}

// Parse reads files and Job logs from outside: whatever it is given, it returns an error or a
// summary with its slices fitted and its strings shared, never a panic.
func FuzzParse(f *testing.F) {
	b, _ := json.Marshal(Summary{SchemaVersion: SchemaVersion, Hosts: []Host{{Name: "n", Models: []Model{{Model: "m",
		Endpoints: []Endpoint{{Load: &Load{Runs: []Run{{Kind: "constant", Errors: map[string]int{"timeout": 1}}}}}}}}}}})
	f.Add(b)
	f.Add([]byte(`{"schema_version":"1.0","hosts":[{"name":"a"},{"name":"b"},{"name":"c"}],"meta":{"thresholds":{"x":{}}}}`))
	f.Add([]byte(`{"schema_version":"1.0","hosts":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		if n := spare(reflect.ValueOf(s)); n != 0 {
			t.Fatalf("%d bytes of spare slice capacity", n)
		}
	})
}
