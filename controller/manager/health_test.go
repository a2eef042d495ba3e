package manager

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/internal/endpoints"
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
			endpoints.AddProbes(mux, p)
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
	endpoints.AddProbes(mux, p)
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
