package daemon

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/shim/policyevents"
	"github.com/netclass-dev/netclass/shim/qosstatus"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// newQoSAgent builds the agent over the daemon's caches, NetworkQoS, the
// NetworkPolicies labelled for netclass, the MultiNetworkPolicies and the
// ClusterNetworkPolicies labelled for netclass, and asks it for a sync
// whenever one of its inputs changes: a NetworkQoS, a NetworkPolicy, a
// MultiNetworkPolicy, a ClusterNetworkPolicy, a pod's labels, a namespace's
// labels, a claim (peer addresses), a pod attached.
func (d *Daemon) newQoSAgent(ctx context.Context, events record.EventRecorder) *ruleagent.Agent {
	resolver := peers.Resolver{API: d.peers, Context: func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 10*time.Second)
	}}
	agent := ruleagent.New(d.runtime, d.publisher,
		qosLister{d.factory.Netclass().V1alpha1().NetworkQoSes().Lister()},
		nodePods{d.podFac.Core().V1().Pods().Lister()},
		resolver, qosport.SyncInterfaces)
	netpols := d.polFac.Networking().V1().NetworkPolicies()
	agent.NetPol = &ruleagent.NetPolicies{
		List: func(ns string) ([]*networkingv1.NetworkPolicy, error) {
			return netpols.Lister().NetworkPolicies(ns).List(labels.Everything())
		},
		Kernel: podpolicy.Sync,
		Check:  podpolicy.Check,
		Peers:  resolver,
		Known:  d.knownNetwork,
		Multi:  d.multiPolicies(),
		// ClusterNetworkPolicies and the namespaces' labels their subjects select by
		Cluster:         d.clusterPolicies(),
		NamespaceLabels: d.namespaceLabels,
		Tidy:            podpolicy.TidyGuard,
	}
	agent.CheckQoS = qosport.CheckInterface // the audit's, in the node's namespace as the syncs
	polEvents := &policyevents.Recorder{Node: d.cfg.NodeName, Events: events, Policy: d.policyObject}
	agent.NADs = d.nadLook // nil-safe: describes nothing when not made
	agent.Quiet = func(ctx context.Context) { d.runtime.WaitIdle(ctx, 2*time.Second) }
	agent.Timed = d.agentMetrics.ObserveSync
	statusWriter := &qosstatus.Background{Writer: d.qosStatus(events), Timeout: 10 * time.Second}
	go statusWriter.Run(ctx)
	agent.Observe = func(ctx context.Context, outs []ruleagent.Outcome) {
		statusWriter.Observe(ctx, outs)
		polEvents.Observe(outs)
	}
	trigger := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { agent.Trigger() },
		UpdateFunc: func(any, any) { agent.Trigger() },
		DeleteFunc: func(any) { agent.Trigger() },
	}
	for _, inf := range d.agentInputs() {
		inf.AddEventHandler(trigger)
	}
	return agent
}

// qosStatus writes the NetworkQoS objects' status of this node.
func (d *Daemon) qosStatus(events record.EventRecorder) *qosstatus.Writer {
	lister := d.factory.Netclass().V1alpha1().NetworkQoSes().Lister()
	return &qosstatus.Writer{
		Node:    d.cfg.NodeName,
		Objects: func() ([]*ncv1.NetworkQoS, error) { return lister.List(labels.Everything()) },
		Client:  func(ns string) qosstatus.Client { return d.nc.NetclassV1alpha1().NetworkQoSes(ns) },
		Events:  events,
		Now:     time.Now,
	}
}

// agentInputs are the informers whose changes ask the agent for a sync.
func (d *Daemon) agentInputs() []cache.SharedIndexInformer {
	infs := []cache.SharedIndexInformer{
		d.factory.Netclass().V1alpha1().NetworkQoSes().Informer(),
		d.podFac.Core().V1().Pods().Informer(),
		d.peerFac.Core().V1().Pods().Informer(),
		d.peerFac.Core().V1().Namespaces().Informer(),
		d.peerFac.Resource().V1().ResourceClaims().Informer(),
		d.polFac.Networking().V1().NetworkPolicies().Informer(),
	}
	if d.multiFac != nil {
		infs = append(infs, d.multiFac.K8sCniCncfIo().V1beta1().MultiNetworkPolicies().Informer())
	}
	if d.clusterFac != nil {
		infs = append(infs, d.clusterFac.Policy().V1beta1().ClusterNetworkPolicies().Informer())
	}
	if d.nadFac != nil {
		infs = append(infs, d.nadFac.ForResource(nadResource).Informer())
	}
	return infs
}

// nodePods reads this node's pods from their informer cache.
type nodePods struct{ lister corelisters.PodLister }

func (p nodePods) Pod(namespace, name string, uid types.UID) (*corev1.Pod, bool) {
	pod, err := p.lister.Pods(namespace).Get(name)
	if err != nil || pod.UID != uid {
		return nil, false
	}
	return pod, true
}

// knownNetwork says whether an entry of a NetworkPolicy's scoping
// annotation names a network object: a PodNetwork's name, a Network's
// namespace/name (from the informers' caches).
func (d *Daemon) knownNetwork(entry string) bool {
	mn, ncv := d.factory.Multinetwork().V1(), d.factory.Netclass().V1alpha1()
	if ns, name, namespaced := strings.Cut(entry, "/"); namespaced {
		_, err := ncv.Networks().Lister().Networks(ns).Get(name)
		return err == nil
	}
	_, err := mn.PodNetworks().Lister().Get(entry)
	return err == nil
}
