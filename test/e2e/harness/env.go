package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	"github.com/netclass-dev/netclass/controller/manager"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// KeepEnv, when set, keeps the harness's directory (daemon log, state) for inspection.
const KeepEnv = "NETCLASS_E2E_KEEP"

// DRAServiceAccount is netclass-dra's identity in conf/deploy.
const DRAServiceAccount = "system:serviceaccount:netclass-system:netclass-dra"

// Env is a test package's netclass on the test bed.
type Env struct {
	Rest *rest.Config
	Kube kubernetes.Interface
	NC   ncclient.Interface
	// Node is node 1's name (the test bed's node in this machine's own namespaces), and DRA
	// its netclass-dra: what tests that read the host's state use.
	Node string
	DRA  *DRA
	// Nodes are the test bed's nodes, node 1 first, and DRAs their netclass-dra daemons
	// (Shared), in the same order.
	Nodes []bed.Node
	DRAs  []*DRA
	// Bins are the binaries the harness built.
	Bins Binaries
	dir  string
	// admin is the test bed's admin kubeconfig.
	admin string
	// forget lists networks whose host state goes at the end.
	forget []forgotten
}

// The package's one environment (test-process-wide, like the netclass-dra
// it runs), the error of a failed set-up, and what TestMain undoes.
var (
	sharedMu  sync.Mutex
	shared    *Env
	sharedErr error
	teardowns []func() error
)

// Main runs a package's tests, then stops its netclass-dra and controller
// and removes what the harness set up. Use it as TestMain.
func Main(m *testing.M) {
	code := m.Run()
	sharedMu.Lock()
	var errs []error
	for i := len(teardowns) - 1; i >= 0; i-- {
		errs = append(errs, teardowns[i]())
	}
	sharedMu.Unlock()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "harness teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Shared returns the package's environment, setting it up at first use:
// the node lock, fresh binaries, netclass-dra's RBAC from conf/deploy, one
// daemon per node (as its service account, in the node's namespaces: the
// defaults of its flags are the node's) and netclass-controller (in-process,
// leader elected on the Lease the product uses). A daemon a test stopped is
// started again by the next Shared.
func Shared(t testing.TB) *Env {
	t.Helper()
	return environment(t, true)
}

// Bare returns the environment of a package that runs netclass itself
// (test/deploy runs it from conf/deploy's manifests): the node lock, the
// CRDs and the clients, but no netclass-dra and no in-process controller
// (Env.DRA is nil, Env.DRAs empty).
func Bare(t testing.TB) *Env {
	t.Helper()
	return environment(t, false)
}

// environment returns the package's environment, with netclass (Shared) or
// without (Bare), setting it up at first use. A package uses one of the two.
func environment(t testing.TB, withNetclass bool) *Env {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedErr != nil {
		// A failed set-up keeps what it took (the node lock) until TestMain
		// ends; setting up again would wait on our own lock.
		t.Fatalf("set up the test bed (failed for an earlier test): %v", sharedErr)
	}
	if shared == nil {
		e := setUpShared(t, withNetclass)
		e.logsOnFailure(t)
		return e
	}
	if (shared.DRA != nil) != withNetclass {
		t.Fatalf("harness: a test package uses either Shared or Bare, not both")
	}
	if withNetclass {
		for _, d := range shared.DRAs {
			if d.PID() != 0 {
				continue
			}
			if err := d.Start(time.Minute); err != nil {
				t.Fatalf("restart netclass-dra on node %s: %v", d.Node, err)
			}
		}
	}
	shared.logsOnFailure(t)
	return shared
}

// setUpShared sets the package's environment up, with netclass (the daemon
// and the controller) or without. sharedMu is held.
func setUpShared(t testing.TB, withNetclass bool) *Env {
	t.Helper()
	rc := testbed.RestConfig(t)
	kube := testbed.Client(t)
	nodes := testbed.Nodes(t, kube)
	e, err := setUpBare(rc, kube, nodes, testbed.Kubeconfig(t))
	if err == nil && withNetclass {
		err = e.startNetclass(Build(t))
	}
	if err != nil {
		sharedErr = err
		t.Fatalf("set up netclass on the test bed: %v", err)
	}
	shared = e
	return e
}

// setUpBare takes the node lock, makes the package's directory and installs
// the CRDs.
func setUpBare(rc *rest.Config, kube kubernetes.Interface, nodes []bed.Node, adminKubeconfig string) (*Env, error) {
	nc, err := ncclient.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	unlock, err := Lock(10 * time.Minute)
	if err != nil {
		return nil, err
	}
	teardowns = append(teardowns, func() error { unlock(); return nil })
	dir, err := os.MkdirTemp("", "netclass-e2e-")
	if err != nil {
		return nil, err
	}
	teardowns = append(teardowns, func() error {
		if os.Getenv(KeepEnv) != "" {
			fmt.Fprintf(os.Stderr, "harness: kept %s (netclass-dra's log and state)\n", dir)
			return nil
		}
		return os.RemoveAll(dir)
	})
	e := &Env{Rest: rc, Kube: kube, NC: nc, Node: nodes[0].Name, Nodes: nodes, dir: dir, admin: adminKubeconfig}
	teardowns = append(teardowns, e.removeNetworkState)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e, testbed.InstallCRDs(ctx, rc)
}

// startNetclass applies netclass-dra's RBAC and the claim namespace guard
// (conf/deploy), starts the controller in-process and one daemon per node
// (as its service account, in the node's namespaces), and waits until every
// daemon is ready.
func (e *Env) startNetclass(bins Binaries) error {
	e.Bins = bins
	teardowns = append(teardowns, func() error { return os.RemoveAll(filepath.Dir(bins.DRA)) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.applyRBAC(ctx); err != nil {
		return err
	}
	for _, n := range e.Nodes {
		kubeconfig, err := e.KubeconfigFor(n.Name)
		if err != nil {
			return err
		}
		e.DRAs = append(e.DRAs, &DRA{Bin: bins.DRA, Kubeconfig: kubeconfig, Node: n.Name, On: n, CNIDirs: bins.CNIDirs,
			StateDir: filepath.Join(e.dir, "state-"+n.Name), LogPath: filepath.Join(e.dir, "netclass-dra-"+n.Name+".log")})
	}
	e.DRA = e.DRAs[0]
	e.startController()
	teardowns = append(teardowns, e.stopDRAs) // in reverse: the daemons stop before the network state goes
	return startAll(e.DRAs, time.Minute)      // on failure TestMain's teardowns stop whatever did start
}

// startAll starts the daemons at once and waits until each is ready.
func startAll(dras []*DRA, timeout time.Duration) error {
	errs := make([]error, len(dras))
	var wg sync.WaitGroup
	for i, d := range dras {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Start(timeout); err != nil {
				errs[i] = fmt.Errorf("netclass-dra on node %s: %w", d.Node, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DRAOn returns the netclass-dra of a node (nil when the package runs none there).
func (e *Env) DRAOn(node string) *DRA {
	for _, d := range e.DRAs {
		if d.Node == node {
			return d
		}
	}
	return nil
}

// RestartDRAsWith restarts every node's netclass-dra with extra flags (none:
// the defaults), as DRA.RestartWith does for one.
func (e *Env) RestartDRAsWith(t testing.TB, extra ...string) {
	t.Helper()
	for _, d := range e.DRAs {
		d.RestartWith(t, extra...)
	}
}

func (e *Env) applyRBAC(ctx context.Context) error {
	if _, err := e.ApplyFile(ctx, "conf/deploy/00-namespace.yaml", nil); err != nil {
		return err // the namespace is never deleted: other tests keep their Leases there
	}
	for _, f := range []string{"conf/deploy/11-dra-rbac.yaml", "conf/deploy/32-claim-namespace-guard.yaml"} {
		created, err := e.ApplyFile(ctx, f, nil)
		teardowns = append(teardowns, func() error { return DeleteApplied(created) })
		if err != nil {
			return err
		}
	}
	return nil
}

// KubeconfigFor writes a kubeconfig that impersonates netclass-dra's service
// account on a node (the node-name extra its DaemonSet token carries).
func (e *Env) KubeconfigFor(node string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(e.admin)
	if err != nil {
		return "", err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = DRAServiceAccount
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:netclass-system", "system:authenticated"}
		ai.ImpersonateUserExtra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	path := filepath.Join(e.dir, "netclass-dra-"+node+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

func (e *Env) startController() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	rc := rest.CopyConfig(e.Rest)
	rc.QPS, rc.Burst = 200, 400 // bulk benchmarks create hundreds of networks at once
	go func() {
		done <- manager.Run(ctx, rc, manager.Options{
			LeaderElect: true, LeaseNamespace: "netclass-system",
			Identity: fmt.Sprintf("netclass-e2e-%d", os.Getpid()), NetworkClassRecheck: 2 * time.Second,
		})
	}()
	teardowns = append(teardowns, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("netclass-controller did not stop within 30 s")
		}
	})
}

// stopDRAs stops the daemons and removes the netclass.dev slices they leave.
func (e *Env) stopDRAs() error {
	var errs []error
	for _, d := range e.DRAs {
		errs = append(errs, d.Stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range e.DRAs {
		slices, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.driver=netclass.dev,spec.nodeName=" + d.Node})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range slices.Items {
			if err := e.Kube.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
