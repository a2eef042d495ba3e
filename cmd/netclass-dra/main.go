// Command netclass-dra is netclass's node daemon: it publishes the node's
// networks as DRA devices, prepares claims as the DRA kubelet plugin, attaches
// pods through NRI with the installed CNI plugins, and writes the claims'
// status. See shim/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/shim/daemon"
	"github.com/netclass-dev/netclass/shim/memlimit"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	nodeName := flag.String("node-name", "", "this node's name (default: $NODE_NAME, then the host name)")
	kubeletDir := flag.String("kubelet-dir", "/var/lib/kubelet", "the kubelet's root directory (plugin socket under plugins/netclass.dev/, registration under plugins_registry/)")
	nriSocket := flag.String("nri-socket", "/var/run/nri/nri.sock", "the container runtime's NRI socket")
	cniBinDir := flag.String("cni-bin-dir", "/opt/cni/bin", "directory of the CNI plugin binaries (a comma-separated list is searched in order)")
	stateDir := flag.String("state-dir", "/var/lib/netclass", "where the checkpoint and the CNI result cache live")
	nadDir := flag.String("nad-dir", "", "where the configurations of the networks offered here are rendered for the NetworkAttachmentDefinitions netclass-controller generates (netclass-nad reads <its stateDir>/nad; default: <state-dir>/nad)")
	slots := flag.Int("fallback-slots", 16, "devices per network when the API server cannot share one device among claims")
	noShared := flag.Bool("no-shared-devices", false, "publish single-use device slots instead of one shared device per network")
	health := flag.String("health-address", "127.0.0.1:9810", "where /healthz and /readyz answer probes (empty: nowhere)")
	nodeDevices := flag.Bool("node-devices", true, "create, keep current and remove the node devices of the networks offered here (VXLAN device and bridge per VNI); off only for a daemon that does not own this host's devices")
	foreign := flag.String("foreign-record-dir", netconf.DefaultDataDir, "the netclass plugins' record store of the attachments Multus (or another CNI caller) makes with them, which the agent covers too (empty: none)")
	metrics := flag.String("metrics-address", "", "where /metrics serves Prometheus metrics, host:port (default: the health address, next to /healthz; empty: nowhere)")
	flag.Parse()
	if !isSet("metrics-address") {
		*metrics = *health
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if limit := memlimit.Apply(); limit > 0 {
		klog.FromContext(ctx).Info("Go memory limit set from the container's", "bytes", limit)
	}
	if err := run(ctx, *kubeconfig, daemon.Config{
		NodeName: nodeNameOr(*nodeName), KubeletDir: *kubeletDir, NRISocket: *nriSocket,
		CNIBinDirs: strings.Split(*cniBinDir, ","), StateDir: *stateDir, NADDir: *nadDir,
		Slots: *slots, NoSharedDevices: *noShared, HealthAddress: *health, NoNodeDevices: !*nodeDevices,
		MetricsAddress: *metrics, ForeignRecordDir: *foreign,
		VFs: sysfsVFs{sysfs.New(os.Getenv("NETCLASS_SYSFS_ROOT"))},
	}); err != nil {
		klog.FromContext(ctx).Error(err, "netclass-dra failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig string, cfg daemon.Config) error {
	rc, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	cfg.RestConfig = rc
	d, err := daemon.New(ctx, cfg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %w", err)
	}
	rc.QPS, rc.Burst = 100, 300
	rc.UserAgent = "netclass-dra"
	return rc, nil
}

// isSet reports whether the command line gave the flag.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func nodeNameOr(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if env := os.Getenv("NODE_NAME"); env != "" {
		return env
	}
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(host)
}
