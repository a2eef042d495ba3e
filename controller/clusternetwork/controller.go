// Package clusternetwork reconciles ClusterNetworks: one NodeNetwork per selected node
// (owned by the ClusterNetwork, deleted when the node leaves or stops matching), the
// aggregate status (nodes, readyNodes, Ready), and the node label
// clusternetwork.netclass.dev/<name>=true on every node whose NodeNetwork is Ready.
// netclass-dra writes NodeNetwork status; until it does, the controller marks a new
// NodeNetwork Ready=Unknown with reason NodeAgentMissing.
package clusternetwork

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/worker"
)

// Name is the controller's name in logs and the workqueue's name.
const Name = "clusternetwork"

// byClusterNetwork indexes NodeNetworks by spec.clusterNetworkName.
const byClusterNetwork = "clusterNetworkName"

// Event reasons besides the condition reasons.
const (
	EventNodeNetworkCreated = "NodeNetworkCreated"
	EventNodeNetworkUpdated = "NodeNetworkUpdated"
	EventNodeNetworkDeleted = "NodeNetworkDeleted"
	EventNodeLabeled        = "NodeLabeled"
	EventNodeUnlabeled      = "NodeUnlabeled"
	EventSyncFailed         = "SyncFailed"
)

// Controller is the ClusterNetwork reconciler.
type Controller struct {
	client          ncclient.Interface
	kube            kubernetes.Interface
	clusterNetworks nclisters.ClusterNetworkLister
	nodeNetworks    cache.Indexer
	nodes           corelisters.NodeLister
	recorder        record.EventRecorder
	queue           *worker.Queue
	synced          []cache.InformerSynced
}

// New wires the controller to the ClusterNetwork, NodeNetwork and Node informers; the
// factories must be started by the caller.
func New(client ncclient.Interface, kube kubernetes.Interface, nc ncinformers.SharedInformerFactory, kubeInf informers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	cnInf := nc.Netclass().V1alpha1().ClusterNetworks()
	nnInf := nc.Netclass().V1alpha1().NodeNetworks()
	nodeInf := kubeInf.Core().V1().Nodes()
	if err := nnInf.Informer().AddIndexers(cache.Indexers{byClusterNetwork: indexNodeNetwork}); err != nil {
		return nil, fmt.Errorf("clusternetwork controller: add nodenetwork index: %w", err)
	}
	c := &Controller{
		client: client, kube: kube,
		clusterNetworks: cnInf.Lister(),
		nodeNetworks:    nnInf.Informer().GetIndexer(),
		nodes:           nodeInf.Lister(),
		recorder:        recorder,
	}
	c.queue = worker.New(Name, c.Reconcile)
	synced, err := worker.AddHandlers(
		worker.Handler{Informer: cnInf.Informer(), Handler: c.queue.Handler()},
		worker.Handler{Informer: nnInf.Informer(), Handler: worker.MapHandler(nodeNetworkKeys, c.queue)},
		worker.Handler{Informer: nodeInf.Informer(), Handler: c.nodeHandler()},
	)
	if err != nil {
		return nil, fmt.Errorf("clusternetwork controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

func indexNodeNetwork(obj any) ([]string, error) {
	nn, ok := obj.(*netclassv1alpha1.NodeNetwork)
	if !ok {
		return nil, nil
	}
	return []string{nn.Spec.ClusterNetworkName}, nil
}

func nodeNetworkKeys(obj any) []string {
	if nn, ok := obj.(*netclassv1alpha1.NodeNetwork); ok {
		return []string{nn.Spec.ClusterNetworkName}
	}
	return nil
}

// nodeHandler enqueues every ClusterNetwork when a node comes, goes, or changes its labels
// (not on the frequent status heartbeats).
func (c *Controller) nodeHandler() cache.ResourceEventHandler {
	all := worker.MapHandler(c.allKeys, c.queue)
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { all.OnAdd(obj, false) },
		DeleteFunc: all.OnDelete,
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && labels.Equals(o.Labels, n.Labels) && o.DeletionTimestamp.Equal(n.DeletionTimestamp) {
				return
			}
			all.OnUpdate(old, obj)
		},
	}
}

// allKeys: a node changed, so every ClusterNetwork may select it or not.
func (c *Controller) allKeys(any) []string {
	cns, err := c.clusterNetworks.List(labels.Everything())
	if err != nil {
		return nil
	}
	keys := make([]string, 0, len(cns))
	for _, cn := range cns {
		keys = append(keys, cn.Name)
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

// Reconcile brings one ClusterNetwork's NodeNetworks, status and node labels up to date.
func (c *Controller) Reconcile(ctx context.Context, key string) (worker.Result, error) {
	cn, err := c.clusterNetworks.Get(key)
	if apierrors.IsNotFound(err) {
		// NodeNetworks go with their owner (garbage collector); the labels are ours to remove.
		return worker.Result{}, c.syncLabels(ctx, nil, key, nil)
	}
	if err != nil {
		return worker.Result{}, fmt.Errorf("get clusternetwork %s: %w", key, err)
	}
	if cn.DeletionTimestamp != nil {
		return worker.Result{}, c.syncLabels(ctx, cn, cn.Name, nil)
	}
	sel, err := NodeSelector(cn)
	if err = errors.Join(err, ValidateBandwidth(cn)); err != nil {
		return worker.Result{}, c.updateStatus(ctx, cn, Summary{}, InvalidCondition(err))
	}
	allNodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return worker.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	nodes := SelectedNodes(allNodes, sel)
	byNode, err := c.syncNodeNetworks(ctx, cn, nodes)
	if err != nil {
		return worker.Result{}, err
	}
	sum := Summarize(nodes, byNode)
	if err := c.updateStatus(ctx, cn, sum, ReadyCondition(sum)); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{}, c.syncLabels(ctx, cn, cn.Name, sum.ReadyOn)
}

// existing returns the NodeNetworks of ClusterNetwork name from the cache.
func (c *Controller) existing(name string) ([]*netclassv1alpha1.NodeNetwork, error) {
	objs, err := c.nodeNetworks.ByIndex(byClusterNetwork, name)
	if err != nil {
		return nil, fmt.Errorf("nodenetworks of clusternetwork %s: %w", name, err)
	}
	out := make([]*netclassv1alpha1.NodeNetwork, 0, len(objs))
	for _, o := range objs {
		if nn, ok := o.(*netclassv1alpha1.NodeNetwork); ok {
			out = append(out, nn)
		}
	}
	return out, nil
}

// syncNodeNetworks creates, updates and deletes NodeNetworks so that each selected node has
// one; it returns the NodeNetwork of each selected node, as known after the changes.
func (c *Controller) syncNodeNetworks(ctx context.Context, cn *netclassv1alpha1.ClusterNetwork, nodes []string) (map[string]*netclassv1alpha1.NodeNetwork, error) {
	existing, err := c.existing(cn.Name)
	if err != nil {
		return nil, err
	}
	byNode := map[string]*netclassv1alpha1.NodeNetwork{}
	for _, nn := range existing {
		if metav1.IsControlledBy(nn, cn) {
			byNode[nn.Spec.NodeName] = nn
		}
	}
	plan := PlanNodeNetworks(cn, NodeOptions(cn, nodes, byNode), existing)
	for _, nn := range plan.Delete {
		if err := c.deleteNodeNetwork(ctx, cn, nn); err != nil {
			return nil, err
		}
		if byNode[nn.Spec.NodeName] == nn {
			delete(byNode, nn.Spec.NodeName)
		}
	}
	for _, nn := range plan.Update {
		out, err := c.client.NetclassV1alpha1().NodeNetworks().Update(ctx, nn, metav1.UpdateOptions{FieldManager: contract.FieldManager})
		if err != nil {
			return nil, c.failed(cn, fmt.Errorf("update nodenetwork %s: %w", nn.Name, err))
		}
		c.recorder.Eventf(cn, corev1.EventTypeNormal, EventNodeNetworkUpdated, "Updated the options of NodeNetwork %s", nn.Name)
		byNode[nn.Spec.NodeName] = out
	}
	for _, nn := range plan.Create {
		out, err := c.createNodeNetwork(ctx, cn, nn)
		if err != nil {
			return nil, err
		}
		byNode[nn.Spec.NodeName] = out
	}
	return byNode, nil
}

func (c *Controller) createNodeNetwork(ctx context.Context, cn *netclassv1alpha1.ClusterNetwork, nn *netclassv1alpha1.NodeNetwork) (*netclassv1alpha1.NodeNetwork, error) {
	nns := c.client.NetclassV1alpha1().NodeNetworks()
	out, err := nns.Create(ctx, nn, metav1.CreateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		return nil, c.failed(cn, fmt.Errorf("create nodenetwork %s: %w", nn.Name, err))
	}
	c.recorder.Eventf(cn, corev1.EventTypeNormal, EventNodeNetworkCreated, "Created NodeNetwork %s for node %s", nn.Name, nn.Spec.NodeName)
	agentMissing := AgentMissingCondition(nn.Spec.NodeName)
	agentMissing.ObservedGeneration = out.Generation
	agentMissing.LastTransitionTime = metav1.Now()
	out.Status.Conditions = []metav1.Condition{agentMissing}
	withStatus, err := nns.UpdateStatus(ctx, out, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		// netclass-dra may have reported first: its status wins, nothing to retry.
		return out, nil
	}
	return withStatus, nil
}

func (c *Controller) deleteNodeNetwork(ctx context.Context, cn *netclassv1alpha1.ClusterNetwork, nn *netclassv1alpha1.NodeNetwork) error {
	uid := nn.UID
	err := c.client.NetclassV1alpha1().NodeNetworks().Delete(ctx, nn.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.failed(cn, fmt.Errorf("delete nodenetwork %s: %w", nn.Name, err))
	}
	c.recorder.Eventf(cn, corev1.EventTypeNormal, EventNodeNetworkDeleted, "Deleted NodeNetwork %s: node %s is no longer selected", nn.Name, nn.Spec.NodeName)
	return nil
}

// failed records a Warning event on the ClusterNetwork and returns err.
func (c *Controller) failed(cn *netclassv1alpha1.ClusterNetwork, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		c.recorder.Event(cn, corev1.EventTypeWarning, EventSyncFailed, err.Error())
	}
	return fmt.Errorf("clusternetwork %s: %w", cn.Name, err)
}
