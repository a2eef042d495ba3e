// Package endpoints serves a netclass daemon's HTTP endpoints: the kubelet's
// probes (/healthz, /readyz) and Prometheus' /metrics, on one server when
// their addresses are equal. netclass-dra and netclass-controller differ only
// in what their probes report (Probes).
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// shutdownWait bounds how long stopping waits for requests in flight.
const shutdownWait = 5 * time.Second

// Probes is what a daemon's probes report.
type Probes interface {
	// Live is nil while the daemon does its work; an error fails /healthz
	// (the kubelet restarts the daemon). ctx is the probe request's.
	Live(ctx context.Context) error
	// Ready says what the daemon is doing once it serves (the body of
	// /readyz after "ok: "), or why it does not serve yet.
	Ready() (string, error)
}

// Endpoint is one HTTP server: its address, what it serves (for messages)
// and its handler, to which a daemon may add more (debug pages).
type Endpoint struct {
	Addr, What string
	Mux        *http.ServeMux
}

// New returns the servers for probes on health and /metrics of gatherer on
// metrics: one server when both addresses are equal, none for "".
func New(health, metrics string, p Probes, gatherer prometheus.Gatherer) []*Endpoint {
	var out []*Endpoint
	at := func(addr, what string) *Endpoint {
		for _, e := range out {
			if e.Addr == addr {
				e.What += " and " + what
				return e
			}
		}
		e := &Endpoint{Addr: addr, What: what, Mux: http.NewServeMux()}
		out = append(out, e)
		return e
	}
	if health != "" {
		AddProbes(at(health, "health probes").Mux, p)
	}
	if metrics != "" {
		at(metrics, "metrics").Mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return out
}

// AddProbes adds /healthz and /readyz of p to mux.
func AddProbes(mux *http.ServeMux, p Probes) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Live(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		msg, err := p.Ready()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok: "+msg)
	})
}

// Serve binds every endpoint first, so that a busy port fails the start
// rather than the first probe or scrape, then serves them until the
// returned stop is called, which waits for the servers to end.
func Serve(ctx context.Context, eps []*Endpoint) (stop func(), err error) {
	var ls []net.Listener
	for _, e := range eps {
		l, err := net.Listen("tcp", e.Addr)
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return nil, fmt.Errorf("listen for %s on %s: %w", e.What, e.Addr, err)
		}
		ls = append(ls, l)
	}
	var wg sync.WaitGroup
	servers := make([]*http.Server, len(eps))
	for i, e := range eps {
		srv := &http.Server{Handler: e.Mux, ReadHeaderTimeout: 5 * time.Second}
		servers[i] = srv
		wg.Go(func() {
			if err := srv.Serve(ls[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Serving failed", "what", e.What, "address", e.Addr)
			}
		})
	}
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownWait)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(shutdown)
		}
		wg.Wait()
	}, nil
}
