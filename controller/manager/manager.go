// Package manager runs netclass-controller: it builds the clients, the event recorder
// (component netclass.dev) and the shared informers, starts every reconciler of controller/
// once the caches are synced, and, when asked, only while holding the leader Lease.
package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	ncscheme "github.com/netclass-dev/netclass/api/generated/clientset/versioned/scheme"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	"github.com/netclass-dev/netclass/controller/clusternetwork"
	"github.com/netclass-dev/netclass/controller/metrics"
	"github.com/netclass-dev/netclass/controller/nad"
	"github.com/netclass-dev/netclass/controller/network"
	"github.com/netclass-dev/netclass/controller/networkclass"
	"github.com/netclass-dev/netclass/controller/networkqos"
	"github.com/netclass-dev/netclass/controller/nodeindex"
	"github.com/netclass-dev/netclass/controller/podnetwork"
	"github.com/netclass-dev/netclass/internal/endpoints"
)

// Defaults of Options.
const (
	DefaultLeaseName      = "netclass-controller"
	DefaultLeaseNamespace = "netclass-system"
	DefaultWorkers        = 2
	DefaultResync         = 10 * time.Minute
)

// Options configure Run.
type Options struct {
	// LeaderElect runs the reconcilers only while holding the Lease LeaseNamespace/LeaseName.
	LeaderElect    bool
	LeaseNamespace string
	LeaseName      string
	// Identity names this instance in the Lease; default hostname + random suffix.
	Identity string
	// Workers per reconciler.
	Workers int
	// NetworkClassRecheck is how often NetworkClasses are checked against discovery again.
	NetworkClassRecheck time.Duration
	// NADRecheck is how often the generated NetworkAttachmentDefinitions are
	// synced without an event (0: nad.DefaultRecheck).
	NADRecheck time.Duration
	// HealthAddress is where /healthz and /readyz answer probes ("": nowhere).
	HealthAddress string
	// MetricsAddress is where /metrics serves Registry ("": nowhere; the
	// health server when it is HealthAddress).
	MetricsAddress string
	// Registry holds the controller's metrics (nil: a registry of its own).
	Registry *prometheus.Registry
}

func (o Options) withDefaults() Options {
	if o.LeaseName == "" {
		o.LeaseName = DefaultLeaseName
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = DefaultLeaseNamespace
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + string(uuid.NewUUID())
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.NetworkClassRecheck <= 0 {
		o.NetworkClassRecheck = networkclass.DefaultRecheck
	}
	return o
}

// RestConfig loads a kubeconfig file, or the in-cluster configuration when path is "".
func RestConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (no --kubeconfig given): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// clients are what every reconciler is built from, and what tells how the
// run goes: the probes' state and the process's metrics.
type clients struct {
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	nc       ncclient.Interface
	recorder record.EventRecorder
	probes   *probes
	metrics  *metrics.Manager
}

// Run runs the controller until ctx ends (nil) or leadership is lost (an error).
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "netclass-controller"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	nc, err := ncclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("netclass client: %w", err)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := metrics.NewManager(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	cl := clients{kube: kube, dyn: dyn, nc: nc, probes: &probes{elect: opts.LeaderElect}, metrics: m}
	stopServing, err := endpoints.Serve(ctx, endpoints.New(opts.HealthAddress, opts.MetricsAddress, cl.probes, reg))
	if err != nil {
		return err
	}
	defer stopServing()
	recorder, stop, err := newRecorder(ctx, kube)
	if err != nil {
		return err
	}
	defer stop()
	cl.recorder = recorder
	ctx = metrics.WithRegisterer(ctx, reg) // the reconcilers' queues register there while they run
	if !opts.LeaderElect {
		m.SetLeader(true)
		return runControllers(ctx, cl, opts)
	}
	return runElected(ctx, cl, opts)
}

// newRecorder returns an event recorder for netclass.dev that knows netclass's types.
func newRecorder(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, func(), error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ncscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, nil, fmt.Errorf("event scheme: %w", err)
		}
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(4)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme, corev1.EventSource{Component: contract.Provider}), b.Shutdown, nil
}

// runElected runs the reconcilers while this instance holds the Lease.
func runElected(ctx context.Context, cl clients, opts Options) error {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.LeaseNamespace, Name: opts.LeaseName},
		Client:     cl.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	var runErr error
	lost := false
	var mu sync.Mutex
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            opts.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "identity", opts.Identity)
				cl.metrics.SetLeader(true)
				err := runControllers(ctx, cl, opts)
				mu.Lock()
				runErr = err
				mu.Unlock()
			},
			OnStoppedLeading: func() {
				cl.metrics.SetLeader(false)
				mu.Lock()
				lost = ctx.Err() == nil
				mu.Unlock()
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	cl.probes.setElector(le)
	le.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	if runErr != nil {
		return runErr
	}
	if lost {
		return errors.New("lost leadership of lease " + opts.LeaseNamespace + "/" + opts.LeaseName)
	}
	return nil
}

// reconciler is what every package of controller/ provides.
type reconciler interface {
	HasSynced() bool
	Run(ctx context.Context, workers int)
}

// runControllers builds the reconcilers, starts the informers and runs until ctx ends.
func runControllers(ctx context.Context, cl clients, opts Options) error {
	logger := klog.FromContext(ctx)
	kubeInf := informers.NewSharedInformerFactory(cl.kube, DefaultResync)
	ncInf := ncinformers.NewSharedInformerFactory(cl.nc, DefaultResync)
	recs, err := build(cl, kubeInf, ncInf, opts)
	if err != nil {
		return err
	}
	kubeInf.Start(ctx.Done())
	ncInf.Start(ctx.Done())
	defer kubeInf.Shutdown()
	defer ncInf.Shutdown()
	synced := make([]cache.InformerSynced, 0, len(recs))
	for _, r := range recs {
		synced = append(synced, r.HasSynced)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	cl.probes.synced.Store(true)
	logger.Info("Caches synced, starting reconcilers", "workers", opts.Workers)
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Go(func() { r.Run(ctx, opts.Workers) })
	}
	wg.Wait()
	return nil
}

// build creates every reconciler.
func build(cl clients, kubeInf informers.SharedInformerFactory, ncInf ncinformers.SharedInformerFactory, opts Options) ([]reconciler, error) {
	var errs []error
	var recs []reconciler
	add := func(r reconciler, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		recs = append(recs, r)
	}
	// A deleted network waits for its generated NADs, which wait for their pods.
	generated := nad.NewGenerated()
	pn, err := podnetwork.New(cl.nc, ncInf, kubeInf, cl.recorder)
	if err == nil {
		pn.WaitForNADs(generated)
	}
	add(pn, err)
	nc, err := networkclass.New(cl.nc, cl.kube.Discovery(), ncInf, cl.recorder)
	if err == nil {
		nc.Recheck = opts.NetworkClassRecheck
	}
	add(nc, err)
	add(clusternetwork.New(cl.nc, cl.kube, ncInf, kubeInf, cl.recorder))
	add(nodeindex.New(cl.kube, kubeInf, cl.recorder))
	net, err := network.New(cl.nc, ncInf, kubeInf, cl.recorder)
	if err == nil {
		net.WaitForNADs(generated)
	}
	add(net, err)
	add(networkqos.New(cl.nc, ncInf, cl.recorder))
	nads, err := nad.New(cl.dyn, cl.kube.Discovery(), kubeInf, ncInf, cl.recorder, generated)
	if err == nil && opts.NADRecheck > 0 {
		nads.Recheck = opts.NADRecheck
	}
	add(nads, err)
	if len(errs) > 0 {
		return nil, fmt.Errorf("build reconcilers: %w", errors.Join(errs...))
	}
	return recs, nil
}

// LeaseNamespaceFromEnv is the namespace the Lease lives in by default: $POD_NAMESPACE,
// else the service account's namespace file, else netclass-system.
func LeaseNamespaceFromEnv() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultLeaseNamespace
}
