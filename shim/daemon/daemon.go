// Package daemon wires netclass-dra together: the ResourceSlice publisher,
// the DRA kubelet plugin, the NRI plugin, the claim status writer and the
// NodeNetwork reporter, over one set of informers and one checkpoint. The
// command (cmd/netclass-dra) and the tests start it the same way.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	mnpinformers "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	cnpinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
	"github.com/netclass-dev/netclass/shim/metrics"
	"github.com/netclass-dev/netclass/shim/nadfiles"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/nodedevices"
	"github.com/netclass-dev/netclass/shim/nodenetwork"
	"github.com/netclass-dev/netclass/shim/nri"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/shim/prepare"
	"github.com/netclass-dev/netclass/shim/publish"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/shim/status"
)

// Config is everything the daemon needs; the flags of api/contract/README.md map onto it.
type Config struct {
	RestConfig *rest.Config
	NodeName   string
	// KubeletDir is the kubelet's root: the plugin socket goes under
	// plugins/netclass.dev/, the registration socket under plugins_registry/.
	KubeletDir string
	NRISocket  string
	CNIBinDirs []string
	StateDir   string
	// NADDir is where the rendered lists of generated NADs are kept
	// (nadfiles; "": StateDir/nad, where netclass-nad looks by default).
	NADDir string
	// Slots is the number of single-use devices per network when shared
	// devices are unavailable or disabled.
	Slots int
	// NoSharedDevices publishes slots from the start.
	NoSharedDevices bool
	// Observer, when set, receives the timing of every attached pod.
	Observer func(nri.Timing)
	// VFs lists the SR-IOV VFs of a PF (nil: SR-IOV networks are not published).
	VFs publish.VFSource
	// HealthAddress is where /healthz and /readyz answer the kubelet's
	// probes ("": nowhere).
	HealthAddress string
	// NoNodeDevices leaves the node's devices alone (nodedevices): for a
	// daemon that does not own the host it runs on, as a test's second one.
	NoNodeDevices bool
	// MetricsAddress is where /metrics serves Registry ("": nowhere; the
	// health server when it is HealthAddress).
	MetricsAddress string
	// Registry holds the daemon's metrics (nil: a registry of its own).
	Registry *prometheus.Registry
	// ForeignRecordDir is the netclass plugins' record store of the
	// attachments other CNI callers (Multus) make with them: their default
	// dataDir, netconf.DefaultDataDir ("": not covered by the agent).
	ForeignRecordDir string
}

// Daemon is a configured netclass-dra.
type Daemon struct {
	cfg     Config
	kube    kubernetes.Interface
	nc      ncclient.Interface
	factory ncinformers.SharedInformerFactory
	nodeFac ncinformers.SharedInformerFactory
	podFac  informers.SharedInformerFactory
	// peerFac caches, cluster-wide, what NetworkQoS selectors resolve against.
	peerFac informers.SharedInformerFactory
	// polFac caches the NetworkPolicies labelled for netclass: the others
	// are never seen (KEP-5790's filtering at the informer).
	polFac informers.SharedInformerFactory
	// multiFac caches the MultiNetworkPolicies (nil: not served).
	multiFac mnpinformers.SharedInformerFactory
	// clusterFac caches the ClusterNetworkPolicies labelled for netclass
	// (nil: not served).
	clusterFac cnpinformers.SharedInformerFactory
	// nadFac caches NetworkAttachmentDefinitions as nadEntry (nil: not
	// served yet), which nadLook reads for the agent.
	nadFac  dynamicinformer.DynamicSharedInformerFactory
	nadLook *nadLookup
	// later are the policy kinds not served at start (watchLaterKinds).
	later     []laterKind
	peers     peers.Listers
	nodes     coreinformers.NodeInformer
	publisher *publish.Publisher
	devices   *deviceLoop
	// nodeNetsChanged asks for the NodeNetwork statuses to be written again.
	nodeNetsChanged chan struct{}
	store           *checkpoint.Store
	runtime         *nri.Plugin
	prepare         *prepare.Plugin
	nodeNets        *nodenetwork.Reporter
	qos             *ruleagent.Agent
	events          record.EventBroadcaster
	metrics         *metrics.DRA
	agentMetrics    *metrics.Agent
	registry        *prometheus.Registry
	// registered is closed once the kubelet registered the plugin and NRI connected.
	registered chan struct{}
	nriUp      chan struct{}
}

// New builds the daemon: clients, informers, checkpoint, plugins.
func New(ctx context.Context, cfg Config) (*Daemon, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("create Kubernetes client: %w", err)
	}
	nc, err := ncclient.NewForConfig(cfg.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("create netclass client: %w", err)
	}
	store, problems := checkpoint.Open(filepath.Join(cfg.StateDir, "claims"))
	if store == nil {
		return nil, errors.Join(problems...)
	}
	for _, p := range problems {
		klog.FromContext(ctx).Error(p, "Checkpoint record set aside")
	}
	d := &Daemon{cfg: cfg, kube: kube, nc: nc, store: store, registered: make(chan struct{}), nriUp: make(chan struct{}),
		nodeNetsChanged: make(chan struct{}, 1)}
	if err := d.newMetrics(len(problems)); err != nil {
		return nil, err
	}
	if err := d.informers(ctx); err != nil {
		return nil, err
	}
	if err := d.multiInformer(ctx); err != nil {
		return nil, err
	}
	if err := d.clusterInformer(ctx); err != nil {
		return nil, err
	}
	if err := d.nadInformer(ctx); err != nil {
		return nil, err
	}
	if err := d.plugins(ctx); err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		d.runtime.GCBlocked = fmt.Sprintf("%d checkpoint record(s) in %s could not be read and were set aside (*.corrupt)",
			len(problems), filepath.Join(cfg.StateDir, "claims"))
	}
	return d, nil
}

// newMetrics registers the daemon's metrics, and the checkpoint's, on the
// configured registry.
func (d *Daemon) newMetrics(setAside int) error {
	d.registry = d.cfg.Registry
	if d.registry == nil {
		// A registry of its own also reports the process (go_goroutines,
		// process_cpu_seconds_total, process_resident_memory_bytes…), as
		// Prometheus's default registry would.
		d.registry = prometheus.NewRegistry()
		d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m, err := metrics.NewDRA(d.registry)
	if err == nil {
		err = d.registry.Register(metrics.NewCheckpoint(d.store))
	}
	if err == nil {
		d.agentMetrics, err = metrics.NewAgent(d.registry)
	}
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	m.SetAside(setAside)
	d.metrics = m
	return nil
}

func (c *Config) validate() error {
	var errs []error
	if c.RestConfig == nil {
		errs = append(errs, errors.New("no API server configuration"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is empty"))
	}
	for name, v := range map[string]string{"kubelet directory": c.KubeletDir, "NRI socket": c.NRISocket, "state directory": c.StateDir} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", name))
		}
	}
	if len(c.CNIBinDirs) == 0 {
		errs = append(errs, errors.New("no CNI bin directory"))
	}
	return errors.Join(errs...)
}

func (d *Daemon) informers(ctx context.Context) (err error) {
	d.newFactories()
	mn, ncv := d.factory.Multinetwork().V1(), d.factory.Netclass().V1alpha1()
	nodes, err := nodeInformer(d.peerFac)
	if err != nil {
		return err
	}
	d.nodes = nodes
	d.newPublisher(ctx, network.Listers{
		Classes: mn.NetworkClasses().Lister(), PodNets: mn.PodNetworks().Lister(),
		Nets: ncv.Networks().Lister(), ClusterNets: ncv.ClusterNetworks().Lister(),
		NodeNets: d.nodeFac.Netclass().V1alpha1().NodeNetworks().Lister(),
		AllNodes: nodes.Lister(), Namespaces: d.peerFac.Core().V1().Namespaces().Lister(),
	})
	trigger := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.publisher.Trigger() },
		UpdateFunc: func(any, any) { d.publisher.Trigger() },
		DeleteFunc: func(any) { d.publisher.Trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		mn.NetworkClasses().Informer(), mn.PodNetworks().Informer(), ncv.Networks().Informer(),
		ncv.ClusterNetworks().Informer(), d.nodeFac.Netclass().V1alpha1().NodeNetworks().Informer(),
	} {
		inf.AddEventHandler(trigger)
	}
	// ClusterNetworks' namespaceSelectors read namespaces' labels.
	d.peerFac.Core().V1().Namespaces().Informer().AddEventHandler(labelsTrigger(d.publisher.Trigger))
	nodes.Informer().AddEventHandler(nodeHandler(d.publisher.Trigger))
	// Registered before Start, so that their listers are served.
	ncv.NetworkQoSes().Informer()
	d.podFac.Core().V1().Pods().Informer()
	d.polFac.Networking().V1().NetworkPolicies().Informer()
	if d.peers, err = peers.NewListers(d.peerFac); err != nil {
		return err
	}
	return nil
}

// newFactories makes the daemon's informer factories: netclass's objects, its
// node's NodeNetworks, the cluster's nodes and peers' claims, its node's pods,
// and the NetworkPolicies labelled for netclass.
func (d *Daemon) newFactories() {
	onNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", d.cfg.NodeName).String()
	}
	d.factory = ncinformers.NewSharedInformerFactory(d.nc, 10*time.Minute)
	d.nodeFac = ncinformers.NewSharedInformerFactoryWithOptions(d.nc, 10*time.Minute, ncinformers.WithTweakListOptions(onNode))
	d.peerFac = informers.NewSharedInformerFactory(d.kube, 10*time.Minute)
	d.podFac = informers.NewSharedInformerFactoryWithOptions(d.kube, 10*time.Minute, informers.WithTweakListOptions(onNode))
	d.polFac = informers.NewSharedInformerFactoryWithOptions(d.kube, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{contract.PolicyControllerLabel: contract.PolicyController}).String()
		}))
}

// newPublisher makes the ResourceSlice publisher and the node devices' loop,
// which tells it what the node can offer.
func (d *Daemon) newPublisher(ctx context.Context, objs network.Listers) {
	mode := publish.Shared
	if d.cfg.NoSharedDevices {
		mode = publish.Slots
	}
	d.devices = newDeviceLoop(&nodedevices.Engine{DataDirs: []string{render.StateDir, nadfile.DataDir}, StateFile: filepath.Join(d.cfg.StateDir, nodedevices.StateFileName)}, nadfiles.Dir{Path: d.cfg.nadDir(), AgentDir: d.cfg.ForeignRecordDir})
	collect := newCollector(ctx, objs, network.LocalHost{}, d.cfg.NodeName)
	collect.offered = d.devices.Offer
	d.publisher = publish.New(collect, publish.Options{Pool: d.cfg.NodeName, Mode: mode, Slots: d.cfg.Slots, VFs: d.cfg.VFs,
		Changed: func() { d.qos.Trigger() }}) // d.qos is made before the publisher runs
}

func (d *Daemon) plugins(ctx context.Context) error {
	recorder, err := d.newRecorder(ctx)
	if err != nil {
		return err
	}
	reporter := &status.Reporter{Status: d.metrics.StatusWriter(&status.Writer{Client: d.kube}), Events: recorder}
	runner := d.metrics.CNI(cni.New(d.cfg.CNIBinDirs, filepath.Join(d.cfg.StateDir, "cni-cache")))
	d.runtime = nri.NewPlugin(ctx, d.store, runner, reporter)
	d.runtime.Observer = func(t nri.Timing) {
		d.qos.Trigger() // the pod's rules were rendered at Prepare: bring them up to date
		if d.cfg.Observer != nil {
			d.cfg.Observer(t)
		}
	}
	d.runtime.Hooks = d.metrics
	d.runtime.Interfaces = podInterfaces // a pod's claim attachments are named around Multus's
	pods := podGetter{cache: d.podFac.Core().V1().Pods().Lister(), client: d.kube}
	d.runtime.Secure = func(ctx context.Context, c *checkpoint.Claim, dev *checkpoint.Device, ref checkpoint.Pod, at checkpoint.Attachment) error {
		pod, err := pods.Pod(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return fmt.Errorf("get pod %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		if pod.UID != ref.UID {
			return fmt.Errorf("pod %s/%s: UID %s, the claim reserves %s", ref.Namespace, ref.Name, pod.UID, ref.UID)
		}
		return d.qos.Guard(ctx, pod, c.UID, dev, at)
	}
	d.runtime.SettleSecure = func(ctx context.Context, sandbox string) error { return d.qos.SettleGuards(ctx, sandbox) } // d.qos is made below
	d.runtime.OnConnect = sync.OnceFunc(func() { close(d.nriUp) })
	d.runtime.Fault = injectFault(d.cfg.StateDir)
	d.prepare = &prepare.Plugin{
		Pool: d.cfg.NodeName, Networks: d.publisher, Store: d.store, Pods: pods, Claims: claimGetter{d.kube},
		QoS: qosLister{d.factory.Netclass().V1alpha1().NetworkQoSes().Lister()},
		Peers: peers.Resolver{API: d.peers, Context: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 10*time.Second)
		}},
		Detacher: d.runtime, Reporter: reporter,
		OnError: d.publisher.HandleError,
	}
	d.runtime.JoinShared = d.prepare.JoinShared
	d.qos = d.newQoSAgent(ctx, recorder)
	d.primaryNetwork(ctx, recorder)
	d.nodeNets = &nodenetwork.Reporter{API: d.nc.NetclassV1alpha1().NodeNetworks(), Host: nodenetwork.LocalHost{}, Devices: d.devices.Devices}
	return nil
}

func (d *Daemon) startKubeletPlugin(ctx context.Context) (*kubeletplugin.Helper, error) {
	pluginDir := filepath.Join(d.cfg.KubeletDir, "plugins", contract.DriverName)
	registry := filepath.Join(d.cfg.KubeletDir, "plugins_registry")
	for _, dir := range []string{pluginDir, registry} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create kubelet plugin directory: %w", err)
		}
	}
	helper, err := kubeletplugin.Start(ctx, d.metrics.DRAPlugin(d.prepare),
		kubeletplugin.DriverName(contract.DriverName),
		kubeletplugin.KubeClient(d.kube),
		kubeletplugin.NodeName(d.cfg.NodeName),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return nil, fmt.Errorf("start the DRA kubelet plugin: %w", err)
	}
	return helper, nil
}

// reportNodeNetworks writes this node's NodeNetwork statuses on every change
// and every 30 s (devices come and go without events).
func (d *Daemon) reportNodeNetworks(ctx context.Context) {
	lister := d.nodeFac.Netclass().V1alpha1().NodeNetworks().Lister()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	changed := d.nodeNetsChanged
	d.nodeFac.Netclass().V1alpha1().NodeNetworks().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(changed) },
		UpdateFunc: func(any, any) { poke(changed) },
	})
	d.nodes.Informer().AddEventHandler(nodeHandler(func() { poke(changed) }))
	for {
		nns, err := lister.List(labelsEverything())
		if err != nil {
			klog.FromContext(ctx).Error(err, "Listing NodeNetworks failed")
		}
		self, _ := d.nodes.Lister().Get(d.cfg.NodeName)
		node := nodenetwork.Node{InternalIP: network.InternalIP(self), Index: network.NodeIndex(self)}
		for _, nn := range nns {
			if err := d.nodeNets.Report(ctx, nn, node); err != nil {
				klog.FromContext(ctx).Error(err, "Reporting a NodeNetwork failed")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-changed:
		}
	}
}

// Ready is closed once the kubelet registered the DRA plugin and NRI is connected.
func (d *Daemon) Ready() <-chan struct{} { return d.registered }

// waitReady logs, and closes Ready, when the kubelet has registered the
// plugin and the runtime connected.
func (d *Daemon) waitReady(ctx context.Context, helper *kubeletplugin.Helper) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if st := helper.RegistrationStatus(); st != nil && st.PluginRegistered {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	select {
	case <-ctx.Done():
		return
	case <-d.nriUp:
	}
	klog.FromContext(ctx).Info("netclass-dra ready: registered with the kubelet, connected to NRI")
	close(d.registered)
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// nadDir is NADDir or its default.
func (c Config) nadDir() string {
	if c.NADDir != "" {
		return c.NADDir
	}
	return filepath.Join(c.StateDir, nadfile.Subdir)
}
