package daemon

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netclass-dev/netclass/shim/metrics"
	"github.com/netclass-dev/netclass/shim/nri"
)

func TestHealthHandler(t *testing.T) {
	ready := make(chan struct{})
	h := healthHandler(ready, func(context.Context) error { return nil })
	probe := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	cases := []struct {
		path          string
		before, after int
	}{
		{"/healthz", http.StatusOK, http.StatusOK},
		{"/readyz", http.StatusServiceUnavailable, http.StatusOK},
		{"/metrics", http.StatusNotFound, http.StatusNotFound},
	}
	for _, tc := range cases {
		if got := probe(tc.path); got != tc.before {
			t.Errorf("%s before ready: %d, want %d", tc.path, got, tc.before)
		}
	}
	close(ready)
	for _, tc := range cases {
		if got := probe(tc.path); got != tc.after {
			t.Errorf("%s once ready: %d, want %d", tc.path, got, tc.after)
		}
	}
}

// TestHealthzFailsWhenWedged: a work loop that holds its lock makes
// /healthz fail (the liveness probe restarts the daemon); once free, ok.
func TestHealthzFailsWhenWedged(t *testing.T) {
	p := nri.NewPlugin(context.Background(), nil, nil, nil)
	h := healthHandler(make(chan struct{}), p.Responsive)
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // the probe's own timeout
		defer cancel()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil).WithContext(ctx))
		return rec.Code, rec.Body.String()
	}
	if code, _ := probe(); code != http.StatusOK {
		t.Fatalf("idle daemon: /healthz %d", code)
	}
	release := p.Hold()
	if code, body := probe(); code != http.StatusServiceUnavailable || !strings.Contains(body, "work loop does not answer") {
		t.Fatalf("wedged daemon: /healthz %d %q", code, body)
	}
	release()
	if code, _ := probe(); code != http.StatusOK {
		t.Fatalf("after the loop moved on: /healthz %d", code)
	}
}

// Metrics are served next to the probes when both addresses are one, on a
// server of their own otherwise, and nowhere for "".
func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewDRA(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveHook("RunPodSandbox", metrics.Success, time.Millisecond)
	ready := make(chan struct{})
	live := func(context.Context) error { return nil }
	get := func(e *endpoint, path string) (int, string) {
		rec := httptest.NewRecorder()
		e.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	one := endpoints("127.0.0.1:9810", "127.0.0.1:9810", ready, live, reg)
	if len(one) != 1 || one[0].what != "health probes and metrics" {
		t.Fatalf("one address: %d endpoints (%+v)", len(one), one)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if code, _ := get(one[0], path); code != http.StatusOK {
			t.Errorf("%s on the shared server: %d", path, code)
		}
	}
	if _, body := get(one[0], "/metrics"); !strings.Contains(body, `netclass_nri_hooks_total{hook="RunPodSandbox",result="success"} 1`) {
		t.Errorf("/metrics lacks the hook counter:\n%s", body)
	}
	two := endpoints("127.0.0.1:9810", ":9811", ready, live, reg)
	if len(two) != 2 {
		t.Fatalf("two addresses: %d endpoints", len(two))
	}
	if code, _ := get(two[0], "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the probes' own server: %d", code)
	}
	if code, _ := get(two[1], "/readyz"); code != http.StatusNotFound {
		t.Errorf("/readyz on the metrics' own server: %d", code)
	}
	if len(endpoints("", "", ready, live, reg)) != 0 {
		t.Error(`"" serves something`)
	}
	if e := endpoints("", ":9811", ready, live, reg); len(e) != 1 || e[0].what != "metrics" {
		t.Errorf("metrics without probes: %+v", e)
	}
}

func TestListenNamesTheBusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	eps := endpoints("127.0.0.1:0", busy.Addr().String(), nil, nil, prometheus.NewRegistry())
	_, err = listen(eps)
	if err == nil || !strings.Contains(err.Error(), "metrics on "+busy.Addr().String()) {
		t.Fatalf("listen on a busy port: %v, want an error naming the address", err)
	}
	ls, err := listen(eps[:1])
	if err != nil {
		t.Fatal(err)
	}
	stop := serve(context.Background(), eps[:1], ls)
	resp, err := http.Get("http://" + ls[0].Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz before ready: %d", resp.StatusCode)
	}
	stop()
	if _, err := http.Get("http://" + ls[0].Addr().String() + "/readyz"); err == nil {
		t.Error("the server still answers after stop")
	}
}
