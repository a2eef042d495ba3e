// Package testbed connects Go tests to the Kubernetes test bed that scripts/testbed/up.sh runs
// on this machine (`make testbed-up`): TESTBED_NODES nodes, node 1 in this machine's own
// namespaces, the others each in a network and a mount namespace of their own (package bed
// reads what the scripts say of them and runs commands there).
//
// Every helper fails the test, never skips it, when the test bed is not there: a test that
// needs a cluster and silently passes without one proves nothing.
package testbed

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netclass-dev/netclass/test/testbed/bed"
)

const (
	// KubeconfigEnv names the environment variable that overrides DefaultKubeconfig.
	KubeconfigEnv = "NETCLASS_KUBECONFIG"
	// DefaultKubeconfig is where up.sh writes the admin kubeconfig.
	DefaultKubeconfig = "/run/netclass-testbed/admin.kubeconfig"
	// Image is the local image up.sh imports: Debian's busybox-static (/bin/sh, ip, nc, …)
	// and a static pause as entrypoint. Pods must use it with imagePullPolicy Never: the
	// test bed has no registry.
	Image = "localhost/netclass-testbed/busybox:1"
	// KubeletDir is the kubelet root directory of every node of the test bed (the kubelet's
	// default; on nodes 2..N a directory of theirs is bound there): DRA plugin sockets go
	// under plugins/, registration under plugins_registry/.
	KubeletDir = "/var/lib/kubelet"
	// NRISocket is the NRI socket of every node's containerd (as KubeletDir).
	NRISocket = "/var/run/nri/nri.sock"
	// HostnameLabel is the node label pods are pinned to a node with (OnNode).
	HostnameLabel = "kubernetes.io/hostname"
)

// notRunning is the one message every helper gives when the cluster cannot be reached.
const notRunning = "the test bed is not running: run `make testbed-up`"

var reachable sync.Map // kubeconfig path → struct{} once /readyz answered ok

// Kubeconfig returns the path of the test bed's admin kubeconfig ($NETCLASS_KUBECONFIG, or
// DefaultKubeconfig) after checking that the API server behind it answers /readyz. It fails
// the test when the test bed is not running.
func Kubeconfig(t testing.TB) string {
	t.Helper()
	path := os.Getenv(KubeconfigEnv)
	if path == "" {
		path = DefaultKubeconfig
	}
	if _, ok := reachable.Load(path); ok {
		return path
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s (kubeconfig %s: %v)", notRunning, path, err)
	}
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatalf("%s (kubeconfig %s: %v)", notRunning, path, err)
	}
	if err := readyz(cfg); err != nil {
		t.Fatalf("%s (API server %s from %s: %v)", notRunning, cfg.Host, path, err)
	}
	reachable.Store(path, struct{}{})
	return path
}

// RestConfig returns a client configuration for the test bed's admin.
func RestConfig(t testing.TB) *rest.Config {
	t.Helper()
	path := Kubeconfig(t)
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatalf("%s (kubeconfig %s: %v)", notRunning, path, err)
	}
	return cfg
}

// Client returns a clientset for the test bed's admin.
func Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(RestConfig(t))
	if err != nil {
		t.Fatalf("create clientset: %v", err)
	}
	return c
}

func loadConfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

func readyz(cfg *rest.Config) error {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("get /readyz: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("get /readyz: answered %q", body)
	}
	return nil
}

// Context returns a context that ends after limit, or earlier so that a quarter of the time
// left before the test binary's deadline (go test -timeout), at least 10 s and at most
// NamespaceTimeout, remains for cleanups. It is cancelled when the test ends.
func Context(t testing.TB, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			reserve := min(max(time.Until(deadline)/4, 10*time.Second), NamespaceTimeout)
			ctx2, cancel2 := context.WithDeadline(ctx, deadline.Add(-reserve))
			prev := cancel
			cancel = func() { cancel2(); prev() }
			ctx = ctx2
		}
	}
	t.Cleanup(cancel)
	return ctx
}

// Bed returns the test bed as its scripts describe it (package bed), failing the test when it
// is not running.
func Bed(t testing.TB) *bed.Bed {
	t.Helper()
	Kubeconfig(t)
	b, err := bed.Load(bed.StateDir())
	if err != nil {
		t.Fatalf("%s (%v)", notRunning, err)
	}
	return b
}

// Nodes returns the test bed's nodes, node 1 first, failing unless each is Ready. Nodes of the
// cluster that are not the test bed's (a test's Node object without a kubelet) are ignored.
func Nodes(t testing.TB, c kubernetes.Interface) []bed.Node {
	t.Helper()
	b := Bed(t)
	ctx := Context(t, 30*time.Second)
	for _, n := range b.Nodes {
		node, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s of the test bed: %v", n.Name, err)
		}
		if err := ready(node); err != nil {
			t.Fatal(err)
		}
	}
	return b.Nodes
}

// NodeName returns the name of node 1, the test bed's node in this machine's own namespaces,
// failing unless every node of the test bed is Ready.
func NodeName(t testing.TB, c kubernetes.Interface) string {
	t.Helper()
	return Nodes(t, c)[0].Name
}

func ready(node *corev1.Node) error {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s is not Ready: %s: %s", node.Name, cond.Reason, cond.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("node %s has no Ready condition", node.Name)
}

// Poll calls cond every interval until it reports done, returns an error, or ctx ends; the
// test fails with what, the last error and cond's last progress notes in those cases: the
// last one made before ctx ended, and the one before it (a call the coming deadline cut
// short, in the client's rate limiter say, notes only that).
func Poll(t testing.TB, ctx context.Context, interval time.Duration, what string, cond func(context.Context) (done bool, note string, err error)) {
	t.Helper()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var notes pollNotes
	for {
		done, n, err := cond(ctx)
		if ctx.Err() == nil || notes.last == "" {
			notes.add(n)
		}
		if err != nil {
			t.Fatalf("%s: %v (%s)", what, err, notes)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (%s)", what, ctx.Err(), notes)
		case <-ticker.C:
		}
	}
}

// pollNotes are a Poll's last two distinct progress notes.
type pollNotes struct{ last, before string }

func (p *pollNotes) add(n string) {
	if n != "" && n != p.last {
		p.before, p.last = p.last, n
	}
}

func (p pollNotes) String() string {
	if p.before == "" {
		return "last seen: " + p.last
	}
	return "last seen: " + p.last + "; before that: " + p.before
}
