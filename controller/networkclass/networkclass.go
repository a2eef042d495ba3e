// Package networkclass reconciles the NetworkClasses that are netclass's: those pointing at
// PodNetwork or at a kind of the netclass.dev group. Their Accepted condition says whether
// the API server serves the class's Group/Version/Kind (through discovery) and whether
// netclass implements it (PodNetwork and netclass.dev Network). Other implementations'
// classes are left alone (several implementations share a cluster); a stale Accepted
// condition an older netclass wrote on one is removed. Classes are looked at again
// periodically, since a CRD can be installed or removed at any time.
package networkclass

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/worker"
)

// Name is the controller's name in logs and the workqueue's name.
const Name = "networkclass"

// DefaultRecheck is how often a class is checked against discovery again.
const DefaultRecheck = time.Minute

// EventDiscoveryFailed is the reason of the event emitted when discovery fails.
const EventDiscoveryFailed = "DiscoveryFailed"

// Implemented returns the Group/Version/Kinds netclass serves as network objects.
func Implemented() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{
		multinetworkv1.SchemeGroupVersion.WithKind("PodNetwork"),
		netclassv1alpha1.SchemeGroupVersion.WithKind("Network"),
	}
}

// Owns reports whether a class of gvk is netclass's to judge: PodNetwork (netclass is one of
// its providers) or any kind of netclass's own API group (so a typo there is reported).
func Owns(gvk schema.GroupVersionKind) bool {
	return gvk.Group == netclassv1alpha1.SchemeGroupVersion.Group ||
		gvk.GroupKind() == multinetworkv1.SchemeGroupVersion.WithKind("PodNetwork").GroupKind()
}

// Controller is the NetworkClass reconciler.
type Controller struct {
	client    ncclient.Interface
	discovery discovery.DiscoveryInterface
	classes   mnlisters.NetworkClassLister
	recorder  record.EventRecorder
	queue     *worker.Queue
	synced    cache.InformerSynced
	// Recheck is the period after which every class is checked again.
	Recheck time.Duration
}

// New wires the controller to the NetworkClass informer; the factory must be started by
// the caller.
func New(client ncclient.Interface, disc discovery.DiscoveryInterface, nc ncinformers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	inf := nc.Multinetwork().V1().NetworkClasses()
	c := &Controller{client: client, discovery: disc, classes: inf.Lister(), recorder: recorder, Recheck: DefaultRecheck}
	c.queue = worker.New(Name, c.Reconcile)
	reg, err := inf.Informer().AddEventHandler(c.queue.Handler())
	if err != nil {
		return nil, fmt.Errorf("networkclass controller: add event handler: %w", err)
	}
	c.synced = reg.HasSynced
	return c, nil
}

// HasSynced reports whether the informer delivered its initial list.
func (c *Controller) HasSynced() bool { return c.synced() }

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

// Reconcile computes and writes one class's Accepted condition.
func (c *Controller) Reconcile(ctx context.Context, key string) (worker.Result, error) {
	nc, err := c.classes.Get(key)
	if apierrors.IsNotFound(err) {
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, fmt.Errorf("get networkclass %s: %w", key, err)
	}
	gvk := schema.GroupVersionKind{Group: nc.Spec.Group, Version: nc.Spec.Version, Kind: nc.Spec.Kind}
	if !Owns(gvk) {
		return worker.Result{}, c.dropStaleCondition(ctx, nc)
	}
	resource, err := ServedResource(c.discovery, gvk)
	if err != nil {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, EventDiscoveryFailed, "Looking up %s failed: %v", gvk, err)
		return worker.Result{}, fmt.Errorf("networkclass %s: %w", nc.Name, err)
	}
	if err := c.updateStatus(ctx, nc, AcceptedCondition(gvk, resource)); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{RequeueAfter: c.Recheck}, nil
}

func (c *Controller) updateStatus(ctx context.Context, nc *multinetworkv1.NetworkClass, want metav1.Condition) error {
	upd := nc.DeepCopy()
	ch := condition.Set(&upd.Status.Conditions, want, nc.Generation)
	if !ch.Updated {
		return nil
	}
	out, err := c.client.MultinetworkV1().NetworkClasses().UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		if !apierrors.IsConflict(err) {
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "UpdateFailed", "Updating status failed: %v", err)
		}
		return fmt.Errorf("update status of networkclass %s: %w", nc.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "accepted", want.Reason)
	if ch.Transitioned {
		typ := corev1.EventTypeNormal
		if want.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		c.recorder.Event(out, typ, want.Reason, want.Message)
	}
	return nil
}

// dropStaleCondition removes the Accepted condition from a class that is not netclass's
// when netclass wrote it (earlier netclass judged every class).
func (c *Controller) dropStaleCondition(ctx context.Context, nc *multinetworkv1.NetworkClass) error {
	if condition.Get(nc.Status.Conditions, multinetworkv1.NetworkClassConditionAccepted) == nil || !wroteAccepted(nc.ManagedFields) {
		return nil
	}
	upd := nc.DeepCopy()
	upd.Status.Conditions = slices.DeleteFunc(upd.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == multinetworkv1.NetworkClassConditionAccepted
	})
	if _, err := c.client.MultinetworkV1().NetworkClasses().UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager}); err != nil {
		return fmt.Errorf("remove netclass's Accepted condition from networkclass %s: %w", nc.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Removed the Accepted condition from another implementation's class")
	return nil
}

// wroteAccepted reports whether netclass's field manager owns the Accepted condition.
func wroteAccepted(fields []metav1.ManagedFieldsEntry) bool {
	for _, f := range fields {
		if f.Manager != contract.FieldManager || f.Subresource != "status" || f.FieldsV1 == nil {
			continue
		}
		var set struct {
			Status struct {
				Conditions map[string]json.RawMessage `json:"f:conditions"`
			} `json:"f:status"`
		}
		if json.Unmarshal(f.FieldsV1.GetRawBytes(), &set) != nil {
			continue
		}
		if _, ok := set.Status.Conditions[`k:{"type":"Accepted"}`]; ok {
			return true
		}
	}
	return false
}

// ServedResource asks discovery for the resource serving gvk; "" when the group/version
// or the kind is not served. Errors other than "not found" are returned.
func ServedResource(disc discovery.DiscoveryInterface, gvk schema.GroupVersionKind) (string, error) {
	list, err := disc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", gvk.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			return r.Name, nil
		}
	}
	return "", nil
}

// AcceptedCondition is the Accepted condition of a class of gvk served by resource ("" when
// not served).
func AcceptedCondition(gvk schema.GroupVersionKind, resource string) metav1.Condition {
	if resource == "" {
		return condition.New(multinetworkv1.NetworkClassConditionAccepted, metav1.ConditionFalse,
			multinetworkv1.NetworkClassReasonKindNotServed,
			fmt.Sprintf("the API server serves no kind %s in %s", gvk.Kind, groupVersion(gvk)))
	}
	for _, impl := range Implemented() {
		if impl == gvk {
			return condition.New(multinetworkv1.NetworkClassConditionAccepted, metav1.ConditionTrue,
				multinetworkv1.NetworkClassReasonAccepted,
				fmt.Sprintf("%s is served as resource %q and implemented by netclass", gvk.Kind, resource))
		}
	}
	return condition.New(multinetworkv1.NetworkClassConditionAccepted, metav1.ConditionFalse,
		multinetworkv1.NetworkClassReasonUnsupported,
		fmt.Sprintf("%s in %s is served as resource %q, but netclass implements only %s", gvk.Kind, groupVersion(gvk), resource, implementedList()))
}

func groupVersion(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + " (core group)"
	}
	return gvk.GroupVersion().String()
}

func implementedList() string {
	parts := make([]string, len(Implemented()))
	for i, g := range Implemented() {
		parts[i] = g.Kind + " (" + g.GroupVersion().String() + ")"
	}
	return strings.Join(parts, " and ")
}
