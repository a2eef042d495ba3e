package manager

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netclass-dev/netclass/controller/metrics"
)

type fakeElector struct {
	leading bool
	leader  string
	stale   bool // the leader failed to renew its Lease
}

func (f *fakeElector) IsLeader() bool    { return f.leading }
func (f *fakeElector) GetLeader() string { return f.leader }
func (f *fakeElector) Check(time.Duration) error {
	if f.leading && f.stale {
		return errors.New("failed election to renew leadership on lease netclass-controller")
	}
	return nil
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// /readyz: ready when caches are synced, and with leader election either
// leading with synced caches or standing by behind a known leader.
func TestReadyz(t *testing.T) {
	cases := []struct {
		name    string
		elect   bool
		elector *fakeElector
		synced  bool
		want    int
		body    string
	}{
		{"no election, caches syncing", false, nil, false, 503, "not synced"},
		{"no election, caches synced", false, nil, true, 200, "caches synced"},
		{"election not started", true, nil, false, 503, "not started"},
		{"nobody leads yet", true, &fakeElector{}, false, 503, "no leader observed"},
		{"standing by", true, &fakeElector{leader: "other-pod_1"}, false, 200, "standing by: other-pod_1 leads"},
		{"leading, caches syncing", true, &fakeElector{leading: true, leader: "me"}, false, 503, "not synced"},
		{"leading, caches synced", true, &fakeElector{leading: true, leader: "me"}, true, 200, "leading"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &probes{elect: c.elect}
			if c.elector != nil {
				p.setElector(c.elector)
			}
			p.synced.Store(c.synced)
			mux := http.NewServeMux()
			p.add(mux)
			code, body := get(t, mux, "/readyz")
			if code != c.want || !strings.Contains(body, c.body) {
				t.Errorf("/readyz = %d %q, want %d containing %q", code, body, c.want, c.body)
			}
		})
	}
}

// /healthz fails only for a leader that stopped renewing its Lease.
func TestHealthz(t *testing.T) {
	e := &fakeElector{leading: true, leader: "me"}
	p := &probes{elect: true}
	mux := http.NewServeMux()
	p.add(mux)
	if code, _ := get(t, mux, "/healthz"); code != 200 {
		t.Errorf("before the election: /healthz %d", code)
	}
	p.setElector(e)
	if code, _ := get(t, mux, "/healthz"); code != 200 {
		t.Errorf("renewing leader: /healthz %d", code)
	}
	e.stale = true
	if code, body := get(t, mux, "/healthz"); code != 503 || !strings.Contains(body, "renew") {
		t.Errorf("stale leader: /healthz %d %q", code, body)
	}
}

func TestEndpointsServeProbesAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewManager(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetLeader(true)
	p := &probes{}
	p.synced.Store(true)
	one := endpoints(":9812", ":9812", p, reg)
	if len(one) != 1 {
		t.Fatalf("%d servers for one address", len(one))
	}
	if code, body := get(t, one[0].mux, "/metrics"); code != 200 || !strings.Contains(body, "netclass_controller_leader 1") {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
	if code, _ := get(t, one[0].mux, "/readyz"); code != 200 {
		t.Errorf("/readyz %d", code)
	}
	two := endpoints("127.0.0.1:0", "127.0.0.1:0", p, reg)
	if len(two) != 1 {
		t.Errorf("equal addresses, %d servers", len(two))
	}
	if eps := endpoints("", "", p, reg); len(eps) != 0 {
		t.Errorf(`"" serves %d endpoints`, len(eps))
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := serve(context.Background(), endpoints("127.0.0.1:0", busy.Addr().String(), p, reg)); err == nil ||
		!strings.Contains(err.Error(), "metrics on "+busy.Addr().String()) {
		t.Errorf("a busy port: %v", err)
	}

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	stop, err := serve(context.Background(), endpoints(addr, addr, p, reg))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "netclass_controller_leader 1") {
		t.Errorf("served /metrics:\n%s", body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/readyz"); err == nil {
		t.Error("the server answers after stop")
	}
}
