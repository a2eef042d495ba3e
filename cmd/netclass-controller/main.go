// Command netclass-controller runs netclass's cluster controller: PodNetwork, NetworkClass,
// ClusterNetwork → NodeNetwork, Network and NetworkQoS reconcilers (controller/).
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/controller/manager"
)

func main() {
	fs := flag.NewFlagSet("netclass-controller", flag.ExitOnError)
	klog.InitFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty: the in-cluster configuration")
	opts := manager.Options{}
	fs.BoolVar(&opts.LeaderElect, "leader-elect", true, "run the reconcilers only while holding the leader Lease")
	fs.StringVar(&opts.LeaseNamespace, "leader-elect-namespace", manager.LeaseNamespaceFromEnv(), "namespace of the leader Lease")
	fs.StringVar(&opts.LeaseName, "leader-elect-name", manager.DefaultLeaseName, "name of the leader Lease")
	fs.IntVar(&opts.Workers, "workers", manager.DefaultWorkers, "workers per reconciler")
	qps := fs.Float64("kube-api-qps", 50, "requests per second to the API server (client-go's default of 5 takes minutes over hundreds of networks)")
	burst := fs.Int("kube-api-burst", 100, "burst of requests to the API server")
	fs.StringVar(&opts.HealthAddress, "health-address", ":9812", "where /healthz and /readyz answer probes, host:port (empty: nowhere)")
	fs.StringVar(&opts.MetricsAddress, "metrics-address", "", "where /metrics serves Prometheus metrics, host:port (default: the health address, next to /healthz; empty: nowhere)")
	_ = fs.Parse(os.Args[1:])
	if !isSet(fs, "metrics-address") {
		opts.MetricsAddress = opts.HealthAddress
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := klog.Background().WithName("netclass-controller")
	ctx = klog.NewContext(ctx, logger)

	cfg, err := manager.RestConfig(*kubeconfig)
	if err != nil {
		logger.Error(err, "Cannot configure the API client")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	if err := manager.Run(ctx, cfg, opts); err != nil {
		logger.Error(err, "netclass-controller stopped")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// isSet reports whether the command line gave the flag.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
