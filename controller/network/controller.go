// Package network reconciles namespaced Networks: it renders each into a netclass-vlan or
// netclass-vxlan plugin config from its ClusterNetwork's options plus its own segment, ipam,
// qos and mtu (conf/netspec: the tenant IPAM policy, one owner per segment across every
// ClusterNetwork, Network and PodNetwork), and publishes it in status.config with a Ready
// condition. status.config is for humans: each node renders what it runs itself, from the
// same specs and its own NodeNetwork.
package network

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/finalizer"
	"github.com/netclass-dev/netclass/controller/segment"
	"github.com/netclass-dev/netclass/controller/usage"
	"github.com/netclass-dev/netclass/controller/worker"
)

// Name is the controller's name in logs and the workqueue's name.
const Name = "network"

// byClusterNetwork indexes Networks by spec.clusterNetworkName.
const byClusterNetwork = "clusterNetworkName"

// Controller is the Network reconciler.
type Controller struct {
	client          ncclient.Interface
	networks        nclisters.NetworkLister
	byCluster       cache.Indexer // the Network informer's, with byClusterNetwork and segment.ByID
	clusterNetworks nclisters.ClusterNetworkLister
	podNetworks     mnlisters.PodNetworkLister
	namespaces      corelisters.NamespaceLister
	claims          resourcelisters.ResourceClaimLister
	slices          resourcelisters.ResourceSliceLister
	recorder        record.EventRecorder
	finalizer       finalizer.Writer[*netclassv1alpha1.Network]
	nads            usage.NADs // nil: generated NADs hold no deletion
	queue           *worker.Queue
	synced          []cache.InformerSynced
}

// New wires the controller to the Network, ClusterNetwork, PodNetwork, Namespace,
// ResourceClaim and ResourceSlice informers (claims allocated its devices hold a deleted
// Network); the factories must be started by the caller.
func New(client ncclient.Interface, nc ncinformers.SharedInformerFactory, kube informers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	netInf := nc.Netclass().V1alpha1().Networks()
	cnInf := nc.Netclass().V1alpha1().ClusterNetworks()
	pnInf := nc.Multinetwork().V1().PodNetworks()
	nsInf := kube.Core().V1().Namespaces()
	claimInf, sliceInf := kube.Resource().V1().ResourceClaims(), kube.Resource().V1().ResourceSlices()
	if err := netInf.Informer().AddIndexers(cache.Indexers{byClusterNetwork: indexNetwork}); err != nil {
		return nil, fmt.Errorf("network controller: add network index: %w", err)
	}
	if err := segment.AddIndex(netInf.Informer()); err != nil {
		return nil, fmt.Errorf("network controller: %w", err)
	}
	c := &Controller{
		client:          client,
		networks:        netInf.Lister(),
		byCluster:       netInf.Informer().GetIndexer(),
		clusterNetworks: cnInf.Lister(),
		podNetworks:     pnInf.Lister(),
		namespaces:      nsInf.Lister(),
		claims:          claimInf.Lister(),
		slices:          sliceInf.Lister(),
		recorder:        recorder,
		finalizer:       finalizerWriter(client, recorder),
	}
	c.queue = worker.New(Name, c.Reconcile)
	synced, err := worker.AddHandlers(
		// A network object changing or going may settle a segment conflict of others.
		worker.Handler{Informer: netInf.Informer(), Handler: worker.MapHandler(c.networkKeys, c.queue)},
		worker.Handler{Informer: cnInf.Informer(), Handler: worker.MapHandler(c.clusterKeys, c.queue)},
		worker.Handler{Informer: pnInf.Informer(), Handler: worker.MapHandler(c.podNetworkKeys, c.queue)},
		// A namespace's labels decide whether ClusterNetworks let its Networks in.
		worker.Handler{Informer: nsInf.Informer(), Handler: worker.LabelsHandler(c.namespaceKeys, c.queue)},
		worker.Handler{Informer: claimInf.Informer(), Handler: worker.MapHandler(c.claimKeys, c.queue)},
		worker.Handler{Informer: sliceInf.Informer(), Handler: worker.MapHandler(c.sliceKeys, c.queue)},
	)
	if err != nil {
		return nil, fmt.Errorf("network controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// finalizerWriter writes the finalizer of Networks.
func finalizerWriter(client ncclient.Interface, recorder record.EventRecorder) finalizer.Writer[*netclassv1alpha1.Network] {
	update := func(ctx context.Context, n *netclassv1alpha1.Network, o metav1.UpdateOptions) (*netclassv1alpha1.Network, error) {
		return client.NetclassV1alpha1().Networks(n.Namespace).Update(ctx, n, o)
	}
	return finalizer.Writer[*netclassv1alpha1.Network]{Kind: "network", Recorder: recorder, Update: update}
}

func indexNetwork(obj any) ([]string, error) {
	if n, ok := obj.(*netclassv1alpha1.Network); ok {
		return []string{n.Spec.ClusterNetworkName}, nil
	}
	return nil, nil
}

// keysOf returns the keys of the Networks under ClusterNetwork cn.
func (c *Controller) keysOf(cn string) []string {
	keys, err := c.byCluster.IndexKeys(byClusterNetwork, cn)
	if err != nil {
		return nil
	}
	return keys
}

// networkKeys: a Network and the Networks on the segments it names (old or
// new object), whose conflict it may start or settle; never the other
// Networks of its ClusterNetwork (a tenant's edit would cost a reconcile
// of each).
func (c *Controller) networkKeys(obj any) []string {
	n, ok := obj.(*netclassv1alpha1.Network)
	if !ok {
		return nil
	}
	keys := []string{n.Namespace + "/" + n.Name}
	for _, seg := range segment.Named(n) {
		keys = append(keys, c.overlapping(seg)...)
	}
	return keys
}

// namespaceKeys: the namespace's Networks and those on the segments they
// name (whether its Networks hold theirs may change).
func (c *Controller) namespaceKeys(obj any) []string {
	return segment.NamespaceHandler(c.byCluster, c.networkKeys)(obj)
}

func (c *Controller) podNetworkKeys(obj any) []string {
	if pn, ok := obj.(*multinetworkv1.PodNetwork); ok {
		return c.overlapping(netspec.PodNetworkHolder(pn).Segment)
	}
	return nil
}

// overlapping returns the keys of the Networks whose segment overlaps seg.
func (c *Controller) overlapping(seg netspec.Segment) []string {
	holders, err := c.segments().Overlapping(seg)
	if err != nil {
		return nil
	}
	var keys []string
	for _, h := range holders {
		if h.Kind == "Network" {
			keys = append(keys, h.Namespace+"/"+h.Name)
		}
	}
	return keys
}

func (c *Controller) segments() segment.Listers {
	return segment.Listers{PodNetworks: c.podNetworks, Networks: c.byCluster, ClusterNetworks: c.clusterNetworks, Namespaces: c.namespaces}
}

// clusterKeys: the Networks of a ClusterNetwork and the Networks naming the
// same segment IDs (its type or VLAN master changing, or it going, moves
// their segments): index lookups only, however many it has.
func (c *Controller) clusterKeys(obj any) []string {
	cn, ok := obj.(*netclassv1alpha1.ClusterNetwork)
	if !ok {
		return nil
	}
	keys := c.keysOf(cn.Name)
	ids := map[string]bool{}
	for _, k := range keys {
		obj, exists, err := c.byCluster.GetByKey(k)
		if err != nil || !exists {
			continue
		}
		named, _ := segment.IndexID(obj)
		for _, id := range named {
			ids[id] = true
		}
	}
	for id := range ids {
		same, _ := c.byCluster.IndexKeys(segment.ByID, id)
		keys = append(keys, same...)
	}
	return keys
}

// HasSynced reports whether the informers delivered their initial lists to the handlers.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

// Reconcile renders one Network and writes its status; it holds the finalizer
// contract.FinalizerInUse on the Network until, deleted, no claim uses it (the
// Network keeps its segment until then).
func (c *Controller) Reconcile(ctx context.Context, key string) (worker.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return worker.Result{}, fmt.Errorf("network key %q: %w", key, err)
	}
	net, err := c.networks.Networks(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, fmt.Errorf("get network %s: %w", key, err)
	}
	cn, err := c.clusterNetworks.Get(net.Spec.ClusterNetworkName)
	if err != nil && !apierrors.IsNotFound(err) {
		return worker.Result{}, fmt.Errorf("get clusternetwork %s of network %s: %w", net.Spec.ClusterNetworkName, key, err)
	}
	if apierrors.IsNotFound(err) {
		cn = nil
	}
	net, users, err := c.hold(ctx, net)
	if err != nil {
		return worker.Result{}, err
	}
	deleting := net.DeletionTimestamp != nil
	segs := c.segments()
	holders, err := segs.Overlapping(netspec.NetworkHolder(net, cn, segs.NamespaceLabels()).Segment)
	if err != nil {
		return worker.Result{}, err
	}
	o := Evaluate(net, cn, holders, segs.NamespaceLabels())
	inUse := InUseCondition(users, deleting)
	o.InUse = &inUse
	if net, err = c.updateStatus(ctx, net, o); err != nil {
		return worker.Result{}, err
	}
	if deleting && len(users) == 0 {
		return worker.Result{}, c.finalizer.Remove(ctx, net, (*netclassv1alpha1.Network).DeepCopy)
	}
	return worker.Result{}, nil
}

// updateStatus writes the status when it differs and emits an event per transition of Ready
// and InUse, and one per update of a deleted Network's InUse (DeletionBlocked).
func (c *Controller) updateStatus(ctx context.Context, net *netclassv1alpha1.Network, o Outcome) (*netclassv1alpha1.Network, error) {
	upd := net.DeepCopy()
	ch := condition.Set(&upd.Status.Conditions, o.Ready, net.Generation)
	held := condition.SetOrRemove(&upd.Status.Conditions, netclassv1alpha1.ConditionSegmentHeld, o.Held, net.Generation)
	var inUse condition.Change
	if o.InUse != nil {
		inUse = condition.Set(&upd.Status.Conditions, *o.InUse, net.Generation)
	}
	upd.Status.Type, upd.Status.ObservedGeneration = o.Type, net.Generation
	sameConfig := SameConfig(net.Status.Config, o.Config)
	if !sameConfig {
		upd.Status.Config = o.Config
	}
	if !ch.Updated && !held.Updated && !inUse.Updated && sameConfig && upd.Status.Type == net.Status.Type && upd.Status.ObservedGeneration == net.Status.ObservedGeneration {
		return net, nil
	}
	out, err := c.client.NetclassV1alpha1().Networks(net.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		if !apierrors.IsConflict(err) {
			c.recorder.Eventf(net, corev1.EventTypeWarning, "UpdateFailed", "Updating status failed: %v", err)
		}
		return nil, fmt.Errorf("update status of network %s/%s: %w", net.Namespace, net.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "ready", o.Ready.Reason)
	if ch.Transitioned {
		typ := corev1.EventTypeNormal
		if o.Ready.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		c.recorder.Event(out, typ, o.Ready.Reason, o.Ready.Message)
	}
	// A new Network's first InUse=False is no news.
	if inUse.Transitioned && (o.InUse.Status == metav1.ConditionTrue || condition.Get(net.Status.Conditions, netclassv1alpha1.ConditionInUse) != nil) {
		c.recorder.Event(out, corev1.EventTypeNormal, o.InUse.Reason, o.InUse.Message)
	}
	if inUse.Updated && out.DeletionTimestamp != nil && o.InUse.Status == metav1.ConditionTrue {
		c.recorder.Event(out, corev1.EventTypeNormal, EventDeletionBlocked, o.InUse.Message)
	}
	return out, nil
}
