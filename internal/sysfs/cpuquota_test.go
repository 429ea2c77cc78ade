package sysfs

import (
	"math"
	"testing"
)

func TestParseCPUMax(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		err  bool
	}{
		{"max 100000\n", 0, false},
		{"200000 100000", 2, false},
		{"150000 100000", 1.5, false},
		{"", 0, true},
		{"max", 0, true},
		{"100000 0", 0, true},
		{"-5 100000", 0, true},
		{"x 100000", 0, true},
	}
	for _, c := range cases {
		got, err := ParseCPUMax(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseCPUMax(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func TestParseCFSQuota(t *testing.T) {
	cases := []struct {
		q, p string
		want float64
		err  bool
	}{
		{"-1\n", "100000\n", 0, false},
		{"400000", "100000", 4, false},
		{"50000", "100000", 0.5, false},
		{"0", "100000", 0, true},
		{"x", "100000", 0, true},
		{"100", "0", 0, true},
	}
	for _, c := range cases {
		got, err := ParseCFSQuota(c.q, c.p)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseCFSQuota(%q, %q) = %v, %v; want %v (error %v)", c.q, c.p, got, err, c.want, c.err)
		}
	}
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "200000 100000", "", "1 1", "9223372036854775807 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCPUMax(s)
		if err != nil {
			return
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("ParseCPUMax(%q) = %v", s, v)
		}
	})
}
