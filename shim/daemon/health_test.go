package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/internal/endpoints"
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

func healthHandler(ready <-chan struct{}, live func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	endpoints.AddProbes(mux, probes{ready: ready, live: live})
	return mux
}
