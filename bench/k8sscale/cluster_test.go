package main

import (
	"strings"
	"testing"
)

const sampleMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="GET",version="v1"} 120
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="POST",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
# HELP apiserver_flowcontrol_dispatched_requests_total [BETA] Number of requests executed by API Priority and Fairness subsystem
# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="gpuvet-scale",priority_level="gpuvet-scale"} 40
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 99
`

// The API server's request counters: every client's, by verb, and gpuvet's own FlowSchema's.
func TestParseCounters(t *testing.T) {
	c, err := parseCounters([]byte(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if c.all != 154 || c.gpuvet != 40 || c.byVerb["GET"] != 120 || c.byVerb["POST"] != 30 {
		t.Errorf("%+v", c)
	}
	d := c.minus(counters{all: 100, gpuvet: 10, byVerb: map[string]float64{"GET": 100}})
	if d.all != 54 || d.gpuvet != 30 || d.verbs() != "GET 20, WATCH 4, POST 30" {
		t.Errorf("delta %+v (%s)", d, d.verbs())
	}
	if _, err := parseCounters([]byte("# TYPE x counter\nx 1\n")); err == nil || !strings.Contains(err.Error(), "apiserver_request_total") {
		t.Errorf("metrics without the request counter: %v", err)
	}
}

// Whatever the metrics endpoint returns, reading it never panics.
func FuzzParseCounters(f *testing.F) {
	f.Add([]byte(sampleMetrics))
	f.Add([]byte("apiserver_request_total{verb=\"GET\"} NaN\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCounters(b)
		if err == nil && c.byVerb == nil {
			t.Error("no verb map")
		}
	})
}
