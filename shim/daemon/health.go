package daemon

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

// livenessWait is how long /healthz waits for the work loop to answer.
const livenessWait = 5 * time.Second

// healthHandler answers the kubelet's probes: /healthz while the daemon's
// work loop answers (live: the lock every sandbox, Unprepare and
// reconciliation takes is free within livenessWait; a wedged loop fails the
// liveness probe and the kubelet restarts the daemon), /readyz once ready is
// closed (registered with the kubelet and first connected to NRI; it stays
// ready across NRI reconnections), so a DaemonSet rollout waits for a node's
// daemon to serve before it moves on.
func healthHandler(ready <-chan struct{}, live func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	addProbes(mux, ready, live)
	return mux
}

func addProbes(mux *http.ServeMux, ready <-chan struct{}, live func(context.Context) error) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), livenessWait)
		defer cancel()
		if err := live(ctx); err != nil {
			http.Error(w, fmt.Sprintf("the work loop does not answer: %v", err), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			fmt.Fprintln(w, "ok")
		default:
			http.Error(w, "not registered with the kubelet and connected to NRI yet", http.StatusServiceUnavailable)
		}
	})
}

// endpoint is one HTTP server of the daemon: its address, what it serves
// (for messages) and its handler.
type endpoint struct {
	addr, what string
	mux        *http.ServeMux
}

// endpoints are the daemon's HTTP servers: the probes on health, /metrics
// of gatherer on metrics, one server when the addresses are equal ("" is
// nowhere).
func endpoints(health, metrics string, ready <-chan struct{}, live func(context.Context) error, gatherer prometheus.Gatherer) []*endpoint {
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
		addProbes(at(health, "health probes").mux, ready, live)
	}
	if metrics != "" {
		at(metrics, "metrics").mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return out
}

// listen binds every endpoint's address, so that a busy port fails the
// start rather than the first probe or scrape.
func listen(eps []*endpoint) ([]net.Listener, error) {
	var out []net.Listener
	for _, e := range eps {
		l, err := net.Listen("tcp", e.addr)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("listen for %s on %s: %w", e.what, e.addr, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// serve serves each endpoint on its listener until the returned stop is
// called, which waits for the servers to end.
func serve(ctx context.Context, eps []*endpoint, ls []net.Listener) (stop func()) {
	var wg sync.WaitGroup
	servers := make([]*http.Server, len(eps))
	for i, e := range eps {
		srv := &http.Server{Handler: e.mux, ReadHeaderTimeout: 5 * time.Second}
		servers[i] = srv
		wg.Go(func() {
			if err := srv.Serve(ls[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Serving failed", "what", e.what, "address", e.addr)
			}
		})
	}
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(shutdown)
		}
		wg.Wait()
	}
}
