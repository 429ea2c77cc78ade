package sysfs

import (
	"reflect"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		err  bool
	}{
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"5", []int{5}, false},
		{" 1 , 2 ", []int{1, 2}, false},
		{"", nil, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"-1", nil, true},
		{"0-70000", nil, true},
	}
	for _, c := range cases {
		got, err := ParseCPUList(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8", "", "1-", "x", "0-65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		for _, c := range cpus {
			if c < 0 || c >= MaxCPU {
				t.Fatalf("ParseCPUList(%q) gave CPU %d", s, c)
			}
		}
	})
}

func TestBusID(t *testing.T) {
	cases := map[string]string{
		"00000000:1B:00.0":    "0000:1b:00.0",
		"0000:00:06.0":        "0000:00:06.0",
		" 00000001:AA:00.0 ":  "0001:aa:00.0",
		"garbage-without-dom": "garbage-without-dom",
	}
	for in, want := range cases {
		if got := BusID(in); got != want {
			t.Errorf("BusID(%q) = %q, want %q", in, got, want)
		}
	}
}
