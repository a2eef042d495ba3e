package nad

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
)

// Name is the controller's name in logs.
const Name = "nad"

// DefaultRecheck is how often the controller syncs without an event: it
// notices the NAD CRD being installed and NADs edited or deleted by hand
// this way (a pod that stops naming a deleting NAD asks for a sync itself).
const DefaultRecheck = 20 * time.Second

// Event reasons on networks.
const (
	// EventNotOwned: a NAD of the network's name exists and netclass did
	// not make it; it is left alone.
	EventNotOwned = "NetworkAttachmentDefinitionNotOwned"
	// EventNotGenerated: the network asked for a NAD it cannot get.
	EventNotGenerated = "NetworkAttachmentDefinitionNotGenerated"
)

// Controller keeps the generated NADs. NADs are read and written with the
// dynamic client, not the typed client of
// github.com/k8snetworkplumbingwg/network-attachment-definition-client
// v1.7.7: that clientset is generated for client-go v0.29 (go.mod is at
// v0.37) and brings glog and a CNI release candidate along, for an object
// whose only field is a string (spec.config).
type Controller struct {
	dyn         dynamic.Interface
	disc        discovery.DiscoveryInterface
	networks    nclisters.NetworkLister
	podNetworks mnlisters.PodNetworkLister
	recorder    record.EventRecorder
	// Recheck is the period of syncs without events (DefaultRecheck).
	Recheck time.Duration
	trigger chan struct{}
	synced  []cache.InformerSynced
	served  *bool
	// pods are every pod, cut down and indexed byNAD (podInformer).
	pods       cache.Indexer
	namespaces corelisters.NamespaceLister
	// deleting are the deleting generated NADs of the last sync.
	deleting *deletingNADs
	// generated is told every sync's generated NADs, by network (nil: nobody
	// asks).
	generated *Generated
}

// New wires the controller to the Network, PodNetwork and pod informers;
// the factories must be started by the caller. generated (nil: none) is
// told what each sync finds.
func New(dyn dynamic.Interface, disc discovery.DiscoveryInterface, kubeInf informers.SharedInformerFactory, nc ncinformers.SharedInformerFactory, recorder record.EventRecorder, generated *Generated) (*Controller, error) {
	netInf := nc.Netclass().V1alpha1().Networks()
	pnInf := nc.Multinetwork().V1().PodNetworks()
	podInf, err := podInformer(kubeInf)
	if err != nil {
		return nil, fmt.Errorf("nad controller: pod informer: %w", err)
	}
	nsInf := kubeInf.Core().V1().Namespaces()
	c := &Controller{dyn: dyn, disc: disc, networks: netInf.Lister(), podNetworks: pnInf.Lister(),
		recorder: recorder, Recheck: DefaultRecheck, trigger: make(chan struct{}, 1),
		pods: podInf.GetIndexer(), namespaces: nsInf.Lister(), deleting: &deletingNADs{}, generated: generated}
	poke := func(any) { c.Trigger() }
	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		netInf.Informer(): cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke},
		pnInf.Informer():  cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke},
		podInf:            c.podHandler(),
		nsInf.Informer():  c.namespaceHandler(),
	}
	for inf, h := range handlers {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("nad controller: add event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// podHandler asks for a sync when a pod stops naming a deleting NAD.
func (c *Controller) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(before, after any) {
			if c.deleting.released(before, after) {
				c.Trigger()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c.deleting.released(obj, nil) {
				c.Trigger()
			}
		},
	}
}

// namespaceHandler asks for a sync when a namespace holding a deleting NAD
// starts terminating or goes: pods of other namespaces hold its NADs no
// longer (inUse).
func (c *Controller) namespaceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(before, after any) {
			b, okB := before.(*corev1.Namespace)
			a, okA := after.(*corev1.Namespace)
			if okB && okA && !isTerminating(b) && isTerminating(a) && c.deleting.inNamespace(a.Name) {
				c.Trigger()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Namespace); ok && c.deleting.inNamespace(n.Name) {
				c.Trigger()
			}
		},
	}
}

// HasSynced reports whether the informers' handlers have seen the initial lists.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Trigger asks for a sync; it never blocks.
func (c *Controller) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Run syncs now, on every trigger and every Recheck, until ctx ends. One
// loop does all: workers does not apply.
func (c *Controller) Run(ctx context.Context, _ int) {
	logger := klog.FromContext(ctx).WithName(Name)
	ctx = klog.NewContext(ctx, logger)
	tick := time.NewTicker(c.Recheck)
	defer tick.Stop()
	for {
		if err := c.Sync(ctx); err != nil {
			logger.Error(err, "Syncing the generated NetworkAttachmentDefinitions failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-c.trigger:
		case <-tick.C:
		}
	}
}

// Served reports whether the API server serves NetworkAttachmentDefinitions.
func Served(disc discovery.DiscoveryInterface) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(GVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", GVR.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == GVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

// Sync brings the generated NADs to what the networks call for. Without
// the NAD CRD it does nothing.
func (c *Controller) Sync(ctx context.Context) error {
	served, err := Served(c.disc)
	if err != nil {
		return err
	}
	if c.served == nil || *c.served != served {
		klog.FromContext(ctx).Info("NetworkAttachmentDefinition API", "served", served)
		c.served = &served
	}
	if !served {
		c.found(nil)
		return nil
	}
	want, err := c.want()
	if err != nil {
		return err
	}
	have, err := c.dyn.Resource(GVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()})
	if err != nil {
		return fmt.Errorf("list generated NetworkAttachmentDefinitions: %w", err)
	}
	owned, deleting := ownedNADs(have.Items, want)
	c.found(owned)
	// before any finalizer is looked at: a pod going meanwhile asks again
	c.deleting.set(deleting)
	var errs []error
	for key, u := range owned {
		if _, ok := want[key]; !ok {
			errs = append(errs, c.retire(ctx, u))
		}
	}
	for key, d := range want {
		errs = append(errs, c.ensure(ctx, d, owned[key]))
	}
	return errors.Join(errs...)
}

// want is the NADs the networks call for (Want); each network that asks for
// one it cannot get is told.
func (c *Controller) want() (map[string]Desired, error) {
	nets, err := c.networks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	pns, err := c.podNetworks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list podnetworks: %w", err)
	}
	want, problems := Want(nets, pns)
	for _, p := range problems {
		c.event(p.Network, EventNotGenerated, p.Message)
	}
	return want, nil
}

// found tells generated the generated NADs there are, by network.
func (c *Controller) found(owned map[string]*unstructured.Unstructured) {
	if c.generated == nil {
		return
	}
	networks := make(map[string]string, len(owned))
	for key, u := range owned {
		networks[key] = u.GetAnnotations()[AnnotationNetwork]
	}
	c.generated.set(byNetwork(networks))
}

// ownedNADs are the generated NADs among items by key, and whether each is
// (or is about to be) deleted and held by the finalizer.
func ownedNADs(items []unstructured.Unstructured, want map[string]Desired) (owned map[string]*unstructured.Unstructured, deleting map[string]bool) {
	owned, deleting = map[string]*unstructured.Unstructured{}, map[string]bool{}
	for i := range items {
		u := &items[i]
		if !Owned(u) {
			continue
		}
		key := u.GetNamespace() + "/" + u.GetName()
		owned[key] = u
		_, wanted := want[key]
		deleting[key] = hasFinalizer(u) && (!wanted || u.GetDeletionTimestamp() != nil)
	}
	return owned, deleting
}

// event records an Event on the network of key ("<ns>/<name>": a Network,
// "<name>": a PodNetwork).
func (c *Controller) event(key, reason, msg string) {
	var obj runtime.Object
	ns, name, namespaced := cut(key)
	if namespaced {
		if n, err := c.networks.Networks(ns).Get(name); err == nil {
			obj = n
		}
	} else if pn, err := c.podNetworks.Get(name); err == nil {
		obj = pn
	}
	if obj != nil {
		c.recorder.Event(obj, corev1.EventTypeWarning, reason, msg)
	}
}

// inUse reports whether a pod that has not ended names the NAD in its
// network selection annotation, as the pod cache has it: a pod of the NAD's
// namespace; or, for a PodNetwork's NAD (the only kind a pod of another
// namespace can attach through: netclass-nad refuses it a Network), a pod of
// another namespace while the NAD's own is not being deleted (so that no
// other namespace's pod holds a namespace's deletion).
func (c *Controller) inUse(u *unstructured.Unstructured) (bool, error) {
	ns := u.GetNamespace()
	pods, err := c.pods.ByIndex(byNAD, ns+"/"+u.GetName())
	if err != nil {
		return true, fmt.Errorf("pods naming NetworkAttachmentDefinition %s: %w", klog.KObj(u), err)
	}
	_, _, ofNetwork := cut(u.GetAnnotations()[AnnotationNetwork])
	crossNamespace := !ofNetwork && !c.terminating(ns)
	for _, p := range pods {
		if p.(*corev1.Pod).Namespace == ns || crossNamespace {
			return true, nil
		}
	}
	return false, nil
}

// terminating reports whether the namespace is being deleted (or gone).
func (c *Controller) terminating(ns string) bool {
	n, err := c.namespaces.Get(ns)
	return err != nil || isTerminating(n)
}

func isTerminating(n *corev1.Namespace) bool {
	return n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating
}
