// Package podnetwork reconciles PodNetworks of provider netclass.dev: the Ready condition
// (parameters validated by conf/netconf, AdministrativelyDisabled, ConditionsNotReady), the
// InUse condition (ResourceClaims allocated a netclass.dev device of the network), and the
// finalizer that holds deletion while the network is in use. PodNetworks of other providers
// are never written to.
package podnetwork

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
const Name = "podnetwork"

// Finalizer is held on every netclass.dev PodNetwork; on deletion it is removed once no
// ResourceClaim uses the network.
const Finalizer = contract.FinalizerInUse

// Event reasons besides the condition reasons (which are emitted on every transition).
const (
	EventDeletionBlocked  = "DeletionBlocked"
	EventFinalizerRemoved = finalizer.EventRemoved
	EventUpdateFailed     = finalizer.EventUpdateFailed
)

// Controller is the PodNetwork reconciler.
type Controller struct {
	client       ncclient.Interface
	podNetworks  mnlisters.PodNetworkLister
	networkIndex cache.Indexer // the Network informer's, with segment.ByID
	clusterNets  nclisters.ClusterNetworkLister
	namespaces   corelisters.NamespaceLister
	claims       resourcelisters.ResourceClaimLister
	slices       resourcelisters.ResourceSliceLister
	recorder     record.EventRecorder
	finalizer    finalizer.Writer[*multinetworkv1.PodNetwork]
	nads         usage.NADs // nil: generated NADs hold no deletion
	queue        *worker.Queue
	synced       []cache.InformerSynced
}

// New wires the controller to the informers it reads (PodNetworks, ResourceClaims,
// ResourceSlices); the factories must be started by the caller.
func New(client ncclient.Interface, nc ncinformers.SharedInformerFactory, kube informers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	pnInf := nc.Multinetwork().V1().PodNetworks()
	netInf := nc.Netclass().V1alpha1().Networks()
	cnInf := nc.Netclass().V1alpha1().ClusterNetworks()
	claimInf := kube.Resource().V1().ResourceClaims()
	sliceInf := kube.Resource().V1().ResourceSlices()
	nsInf := kube.Core().V1().Namespaces()
	if err := segment.AddIndex(netInf.Informer()); err != nil {
		return nil, fmt.Errorf("podnetwork controller: %w", err)
	}
	c := &Controller{
		client:       client,
		podNetworks:  pnInf.Lister(),
		networkIndex: netInf.Informer().GetIndexer(),
		clusterNets:  cnInf.Lister(),
		namespaces:   nsInf.Lister(),
		claims:       claimInf.Lister(),
		slices:       sliceInf.Lister(),
		recorder:     recorder,
		finalizer:    finalizer.Writer[*multinetworkv1.PodNetwork]{Kind: "podnetwork", Update: client.MultinetworkV1().PodNetworks().Update, Recorder: recorder},
	}
	c.queue = worker.New(Name, c.Reconcile)
	synced, err := worker.AddHandlers(
		// A network object changing or going may settle a segment conflict of others.
		worker.Handler{Informer: pnInf.Informer(), Handler: worker.MapHandler(c.podNetworkKeys, c.queue)},
		worker.Handler{Informer: netInf.Informer(), Handler: worker.MapHandler(c.networkKeys, c.queue)},
		// A ClusterNetwork changing type or VLAN master, or going, moves its Networks' segments.
		worker.Handler{Informer: cnInf.Informer(), Handler: worker.MapHandler(c.segmentKeys, c.queue)},
		worker.Handler{Informer: claimInf.Informer(), Handler: worker.MapHandler(c.claimKeys, c.queue)},
		worker.Handler{Informer: sliceInf.Informer(), Handler: worker.MapHandler(c.sliceKeys, c.queue)},
		// A namespace's labels decide whether its Networks hold their segments.
		worker.Handler{Informer: nsInf.Informer(), Handler: worker.LabelsHandler(c.namespaceKeys, c.queue)},
	)
	if err != nil {
		return nil, fmt.Errorf("podnetwork controller: %w", err)
	}
	c.synced = synced
	return c, nil
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

// claimKeys: the PodNetworks a claim uses, and every PodNetwork now marked in use or being
// deleted (a claim that stopped using one may no longer name it).
func (c *Controller) claimKeys(obj any) []string {
	keys, claim := usage.ClaimKeys(obj, c.deviceNetworks, false)
	if claim == nil {
		return nil
	}
	pns, err := c.podNetworks.List(labels.Everything())
	if err != nil {
		return keys
	}
	for _, pn := range pns {
		if pn.DeletionTimestamp != nil || condition.IsTrue(pn.Status.Conditions, multinetworkv1.PodNetworkConditionInUse) {
			keys = append(keys, pn.Name)
		}
	}
	return keys
}

// segmentKeys: every netclass PodNetwork with a segment (cluster-scoped, an
// admin's few), for a change an admin made.
func (c *Controller) segmentKeys(any) []string {
	pns, err := c.podNetworks.List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []string
	for _, pn := range pns {
		if pn.Spec.Provider == contract.Provider && netspec.PodNetworkHolder(pn).Segment.Kind != "" {
			keys = append(keys, pn.Name)
		}
	}
	return keys
}

func (c *Controller) podNetworkKeys(obj any) []string {
	pn, ok := obj.(*multinetworkv1.PodNetwork)
	if !ok {
		return nil
	}
	return append(c.overlapping(netspec.PodNetworkHolder(pn).Segment), pn.Name)
}

func (c *Controller) networkKeys(obj any) []string {
	n, ok := obj.(*netclassv1alpha1.Network)
	if !ok {
		return nil
	}
	var keys []string
	for _, seg := range segment.Named(n) { // whatever its ClusterNetwork makes of them (it may be gone)
		keys = append(keys, c.overlapping(seg)...)
	}
	return keys
}

// namespaceKeys: the PodNetworks on the segments the namespace's Networks name.
func (c *Controller) namespaceKeys(obj any) []string {
	return segment.NamespaceHandler(c.networkIndex, c.networkKeys)(obj)
}

// overlapping returns the names of the PodNetworks whose segment overlaps seg.
func (c *Controller) overlapping(seg netspec.Segment) []string {
	if seg.Kind == "" {
		return nil
	}
	pns, err := c.podNetworks.List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []string
	for _, pn := range pns {
		if pn.Spec.Provider == contract.Provider && netspec.PodNetworkHolder(pn).Segment.Overlaps(seg) {
			keys = append(keys, pn.Name)
		}
	}
	return keys
}

func (c *Controller) segments() segment.Listers {
	return segment.Listers{PodNetworks: c.podNetworks, Networks: c.networkIndex, ClusterNetworks: c.clusterNets, Namespaces: c.namespaces}
}

// sliceKeys: the PodNetworks the slice's netclass.dev devices name.
func (c *Controller) sliceKeys(obj any) []string { return usage.SliceKeys(obj, false) }

func (c *Controller) deviceNetworks() usage.Devices { return usage.DevicesOf(c.slices) }

// users returns the claims that use the PodNetwork called name.
func (c *Controller) users(name string) ([]string, error) {
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list resource claims: %w", err)
	}
	return usage.Users(claims, c.deviceNetworks())[usage.Network{Name: name}], nil
}

// Reconcile brings one PodNetwork's finalizer and status up to date.
func (c *Controller) Reconcile(ctx context.Context, key string) (worker.Result, error) {
	pn, err := c.podNetworks.Get(key)
	if apierrors.IsNotFound(err) {
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, fmt.Errorf("get podnetwork %s: %w", key, err)
	}
	if pn.Spec.Provider != contract.Provider {
		return worker.Result{}, nil // another provider's network: strictly left alone
	}
	users, err := c.users(pn.Name)
	if err != nil {
		return worker.Result{}, err
	}
	deleting := pn.DeletionTimestamp != nil
	if deleting {
		users = append(users, usage.NADUsers(c.nads, pn.Name)...)
	} else {
		if pn, err = c.finalizer.Ensure(ctx, pn, (*multinetworkv1.PodNetwork).DeepCopy); err != nil {
			return worker.Result{}, err
		}
	}
	holders, err := c.segments().Overlapping(netspec.PodNetworkHolder(pn).Segment)
	if err != nil {
		return worker.Result{}, err
	}
	if pn, err = c.updateStatus(ctx, pn, conditions(pn, holders), users, deleting); err != nil {
		return worker.Result{}, err
	}
	if deleting && len(users) == 0 {
		return worker.Result{}, c.finalizer.Remove(ctx, pn, (*multinetworkv1.PodNetwork).DeepCopy)
	}
	return worker.Result{}, nil
}

// statusConditions are the conditions Reconcile computes (InUse is updateStatus's).
type statusConditions struct {
	ready metav1.Condition
	held  *metav1.Condition
}

// updateStatus writes Ready, SegmentHeld and InUse when they differ, then emits an event per
// transition of Ready and InUse (a lost segment is Ready's SegmentConflict).
func (c *Controller) updateStatus(ctx context.Context, pn *multinetworkv1.PodNetwork, conds statusConditions, users []string, deleting bool) (*multinetworkv1.PodNetwork, error) {
	upd := pn.DeepCopy()
	ready, inUse := conds.ready, InUseCondition(users, deleting)
	readyChange := condition.Set(&upd.Status.Conditions, ready, pn.Generation)
	heldChange := condition.SetOrRemove(&upd.Status.Conditions, netclassv1alpha1.ConditionSegmentHeld, conds.held, pn.Generation)
	inUseChange := condition.Set(&upd.Status.Conditions, inUse, pn.Generation)
	if !readyChange.Updated && !heldChange.Updated && !inUseChange.Updated {
		return pn, nil
	}
	out, err := c.client.MultinetworkV1().PodNetworks().UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		if !apierrors.IsConflict(err) {
			c.recorder.Eventf(pn, corev1.EventTypeWarning, EventUpdateFailed, "Updating status failed: %v", err)
		}
		return nil, fmt.Errorf("update status of podnetwork %s: %w", pn.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "ready", ready.Reason, "inUse", inUse.Status)
	if readyChange.Transitioned {
		c.recorder.Event(out, eventType(ready), ready.Reason, ready.Message)
	}
	if inUseChange.Transitioned {
		c.recorder.Event(out, corev1.EventTypeNormal, inUse.Reason, inUse.Message)
	}
	if deleting && len(users) > 0 && inUseChange.Updated {
		c.recorder.Event(out, corev1.EventTypeNormal, EventDeletionBlocked, inUse.Message)
	}
	return out, nil
}

// eventType: Warning for a Ready=False that needs fixing, Normal otherwise.
func eventType(ready metav1.Condition) string {
	if ready.Status == metav1.ConditionTrue || ready.Reason == multinetworkv1.PodNetworkReasonAdministrativelyDisabled {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// WaitForNADs makes a deleted PodNetwork wait for its generated NADs too
// (see usage.NADs); call before Run.
func (c *Controller) WaitForNADs(nads usage.NADs) {
	c.nads = nads
	nads.Notify(usage.Requeue(false, func() []string {
		pns, _ := c.podNetworks.List(labels.Everything())
		return usage.DeletingKeys(pns)
	}, c.queue.Add))
}
