package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

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
	return mux
}

// listenHealth binds the probe address ("" disables the endpoint), so that a
// busy port fails the start rather than the first probe.
func listenHealth(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for health probes on %s: %w", addr, err)
	}
	return l, nil
}

// startHealth serves the probes on l (nil: none) until the returned stop is
// called, which waits for the server to end.
func (d *Daemon) startHealth(ctx context.Context, l net.Listener) (stop func()) {
	if l == nil {
		return func() {}
	}
	srv := &http.Server{Handler: healthHandler(d.registered, d.runtime.Responsive), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Serving health probes failed", "address", l.Addr().String())
		}
	}()
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-done
	}
}
