package daemon

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthHandler(t *testing.T) {
	ready := make(chan struct{})
	h := healthHandler(ready)
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

func TestListenHealth(t *testing.T) {
	if l, err := listenHealth(""); l != nil || err != nil {
		t.Fatalf(`listenHealth("") = %v, %v; want no listener`, l, err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = listenHealth(busy.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "health probes on "+busy.Addr().String()) {
		t.Fatalf("listen on a busy port: %v, want an error naming the address", err)
	}
}
