package endpoints

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeProbes reports what its fields say.
type fakeProbes struct {
	live  error
	ready string
}

func (f fakeProbes) Live(context.Context) error { return f.live }
func (f fakeProbes) Ready() (string, error) {
	if f.ready == "" {
		return "", errors.New("not yet")
	}
	return f.ready, nil
}

func registry(t *testing.T) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "netclass_test_total"})
	c.Inc()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

func get(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestProbes(t *testing.T) {
	for _, tc := range []struct {
		name             string
		p                fakeProbes
		healthz, readyz  int
		healthBody, body string
	}{
		{"starting", fakeProbes{}, 200, 503, "ok", "not yet"},
		{"ready", fakeProbes{ready: "serving"}, 200, 200, "ok", "ok: serving"},
		{"wedged", fakeProbes{live: errors.New("stuck"), ready: "serving"}, 503, 200, "stuck", "ok: serving"},
	} {
		mux := http.NewServeMux()
		AddProbes(mux, tc.p)
		if code, body := get(mux, "/healthz"); code != tc.healthz || !strings.Contains(body, tc.healthBody) {
			t.Errorf("%s: /healthz %d %q, want %d with %q", tc.name, code, body, tc.healthz, tc.healthBody)
		}
		if code, body := get(mux, "/readyz"); code != tc.readyz || !strings.Contains(body, tc.body) {
			t.Errorf("%s: /readyz %d %q, want %d with %q", tc.name, code, body, tc.readyz, tc.body)
		}
	}
}

// Metrics are served next to the probes when both addresses are one, on a
// server of their own otherwise, and nowhere for "".
func TestNew(t *testing.T) {
	reg, p := registry(t), fakeProbes{ready: "serving"}
	one := New("127.0.0.1:9810", "127.0.0.1:9810", p, reg)
	if len(one) != 1 || one[0].What != "health probes and metrics" {
		t.Fatalf("one address: %+v", one)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(one[0].Mux, path); code != http.StatusOK {
			t.Errorf("%s on the shared server: %d", path, code)
		}
	}
	if _, body := get(one[0].Mux, "/metrics"); !strings.Contains(body, "netclass_test_total 1") {
		t.Errorf("/metrics lacks the counter:\n%s", body)
	}
	two := New("127.0.0.1:9810", ":9811", p, reg)
	if len(two) != 2 {
		t.Fatalf("two addresses: %d endpoints", len(two))
	}
	if code, _ := get(two[0].Mux, "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the probes' own server: %d", code)
	}
	if code, _ := get(two[1].Mux, "/readyz"); code != http.StatusNotFound {
		t.Errorf("/readyz on the metrics' own server: %d", code)
	}
	if len(New("", "", p, reg)) != 0 {
		t.Error(`"" serves something`)
	}
	if e := New("", ":9811", p, reg); len(e) != 1 || e[0].What != "metrics" {
		t.Errorf("metrics without probes: %+v", e)
	}
}

// A busy port fails Serve, naming what and where; a served endpoint answers
// until stop, and not after.
func TestServe(t *testing.T) {
	reg, p := registry(t), fakeProbes{ready: "serving"}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := Serve(context.Background(), New("127.0.0.1:0", busy.Addr().String(), p, reg)); err == nil ||
		!strings.Contains(err.Error(), "metrics on "+busy.Addr().String()) {
		t.Fatalf("a busy port: %v, want an error naming the address", err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	stop, err := Serve(context.Background(), New(addr, addr, p, reg))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "netclass_test_total 1") {
		t.Errorf("served /metrics:\n%s", body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/readyz"); err == nil {
		t.Error("the server answers after stop")
	}
}
