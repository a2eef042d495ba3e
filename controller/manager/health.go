package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// leaseTolerance is how long past its Lease's expiry a leader that failed to
// renew still passes /healthz (client-go's leader election then ends the
// process anyway).
const leaseTolerance = 20 * time.Second

// elector is what the probes read of the leader election.
type elector interface {
	IsLeader() bool
	GetLeader() string
	Check(maxTolerableExpiredLease time.Duration) error
}

// probes is the state /healthz and /readyz report.
type probes struct {
	elect   bool // leader election is on
	synced  atomic.Bool
	mu      sync.Mutex
	elector elector
}

func (p *probes) setElector(e elector) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.elector = e
}

func (p *probes) currentElector() elector {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.elector
}

// ready says whether this instance does its part: without leader election,
// once its caches synced; with it, leading with synced caches, or standing
// by while another instance holds the Lease.
func (p *probes) ready() (string, error) {
	if !p.elect {
		if p.synced.Load() {
			return "caches synced", nil
		}
		return "", errors.New("informer caches not synced yet")
	}
	e := p.currentElector()
	switch {
	case e == nil:
		return "", errors.New("leader election not started yet")
	case e.IsLeader() && p.synced.Load():
		return "leading, caches synced", nil
	case e.IsLeader():
		return "", errors.New("leading, informer caches not synced yet")
	case e.GetLeader() != "":
		return "standing by: " + e.GetLeader() + " leads", nil
	}
	return "", errors.New("no leader observed yet")
}

// live fails when this instance leads but has not renewed its Lease for
// longer than the Lease's duration plus leaseTolerance.
func (p *probes) live() error {
	if e := p.currentElector(); e != nil {
		return e.Check(leaseTolerance)
	}
	return nil
}

func (p *probes) add(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := p.live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		msg, err := p.ready()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok: "+msg)
	})
}

// endpoint is one HTTP server: address, what it serves (for messages), handler.
type endpoint struct {
	addr, what string
	mux        *http.ServeMux
}

// endpoints are the probes on health and /metrics of gatherer on metrics,
// one server when both addresses are equal ("" is nowhere).
func endpoints(health, metrics string, p *probes, gatherer prometheus.Gatherer) []*endpoint {
	var out []*endpoint
	at := func(addr, what string) *endpoint {
		for _, e := range out {
			if e.addr == addr {
				e.what += " and " + what
				return e
			}
		}
		e := &endpoint{addr: addr, what: what, mux: http.NewServeMux()}
		out = append(out, e)
		return e
	}
	if health != "" {
		p.add(at(health, "health probes").mux)
	}
	if metrics != "" {
		at(metrics, "metrics").mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return out
}

// serve binds every endpoint (a busy port fails the start) and serves them
// until the returned stop is called.
func serve(ctx context.Context, eps []*endpoint) (stop func(), err error) {
	var servers []*http.Server
	var wg sync.WaitGroup
	stop = func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(shutdown)
		}
		wg.Wait()
	}
	for _, e := range eps {
		l, err := net.Listen("tcp", e.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("listen for %s on %s: %w", e.what, e.addr, err)
		}
		srv := &http.Server{Handler: e.mux, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		wg.Go(func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Serving failed", "what", e.what, "address", e.addr)
			}
		})
	}
	return stop, nil
}
