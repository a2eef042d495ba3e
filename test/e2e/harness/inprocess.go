package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/netclass-dev/netclass/shim/daemon"
	"github.com/netclass-dev/netclass/shim/nri"
)

// InProcess replaces node 1's netclass-dra subprocess with a daemon running in
// the test process, which runs in node 1's namespaces (same identity, its own
// state directory, logs appended to the subprocess's log file), so that a
// benchmark can observe each pod's timing (its pods must run on node 1). It returns when the daemon is ready; the returned function stops
// it, and the next Shared call starts the subprocess again.
func (e *Env) InProcess(tb testing.TB, observer func(nri.Timing)) func() {
	tb.Helper()
	if err := e.DRA.Stop(); err != nil {
		tb.Fatalf("stop the netclass-dra subprocess: %v", err)
	}
	log, err := os.OpenFile(e.DRA.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	rc := rest.CopyConfig(e.Rest)
	rc.Impersonate = rest.ImpersonationConfig{UserName: DRAServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:netclass-system", "system:authenticated"},
		Extra:  map[string][]string{"authentication.kubernetes.io/node-name": {e.Node}}}
	rc.QPS, rc.Burst, rc.UserAgent = 100, 300, "netclass-dra-inprocess"
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log), textlogger.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	d, err := daemon.New(ctx, daemon.Config{
		RestConfig: rc, NodeName: e.Node, KubeletDir: "/var/lib/kubelet", NRISocket: "/var/run/nri/nri.sock",
		CNIBinDirs: e.DRA.CNIDirs, StateDir: filepath.Join(e.dir, fmt.Sprintf("inprocess-%d", time.Now().UnixNano())),
		Observer: observer,
	})
	if err != nil {
		cancel()
		log.Close()
		tb.Fatalf("in-process netclass-dra: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("in-process netclass-dra: %v", err)
		}
		log.Close()
	}
	select {
	case <-d.Ready():
		return stop
	case err := <-done:
		cancel()
		log.Close()
		tb.Fatalf("in-process netclass-dra ended during start: %v%s", err, e.DRA.Tail(30))
	case <-time.After(time.Minute):
		stop()
		tb.Fatalf("in-process netclass-dra not ready after a minute%s", e.DRA.Tail(30))
	}
	return nil
}
