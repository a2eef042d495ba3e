package nad

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
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
// notices the NAD CRD being installed, NADs edited or deleted by hand and
// pods that stopped naming a deleting NAD this way.
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
	kube        kubernetes.Interface
	networks    nclisters.NetworkLister
	podNetworks mnlisters.PodNetworkLister
	recorder    record.EventRecorder
	// Recheck is the period of syncs without events (DefaultRecheck).
	Recheck time.Duration
	trigger chan struct{}
	synced  []cache.InformerSynced
	served  *bool
}

// New wires the controller to the Network and PodNetwork informers; the
// factory must be started by the caller.
func New(dyn dynamic.Interface, disc discovery.DiscoveryInterface, kube kubernetes.Interface, nc ncinformers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	netInf := nc.Netclass().V1alpha1().Networks()
	pnInf := nc.Multinetwork().V1().PodNetworks()
	c := &Controller{dyn: dyn, disc: disc, kube: kube, networks: netInf.Lister(), podNetworks: pnInf.Lister(),
		recorder: recorder, Recheck: DefaultRecheck, trigger: make(chan struct{}, 1)}
	poke := func(any) { c.Trigger() }
	for _, inf := range []cache.SharedIndexInformer{netInf.Informer(), pnInf.Informer()} {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
		})
		if err != nil {
			return nil, fmt.Errorf("nad controller: add event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
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
		return nil
	}
	nets, err := c.networks.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	pns, err := c.podNetworks.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list podnetworks: %w", err)
	}
	want, problems := Want(nets, pns)
	for _, p := range problems {
		c.event(p.Network, EventNotGenerated, p.Message)
	}
	have, err := c.dyn.Resource(GVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()})
	if err != nil {
		return fmt.Errorf("list generated NetworkAttachmentDefinitions: %w", err)
	}
	var errs []error
	owned := map[string]*unstructured.Unstructured{}
	for i := range have.Items {
		u := &have.Items[i]
		if !Owned(u) {
			continue
		}
		owned[u.GetNamespace()+"/"+u.GetName()] = u
		if _, ok := want[u.GetNamespace()+"/"+u.GetName()]; !ok {
			errs = append(errs, c.retire(ctx, u))
		}
	}
	for key, d := range want {
		errs = append(errs, c.ensure(ctx, d, owned[key]))
	}
	return errors.Join(errs...)
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

// inUse reports whether a pod of the NAD's namespace that has not ended
// names it in its network selection annotation.
func (c *Controller) inUse(ctx context.Context, ns, name string) (bool, error) {
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return true, fmt.Errorf("list pods of %s: %w", ns, err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if slices.Contains(Names(p.Namespace, p.Annotations[AnnotationNetworks]), ns+"/"+name) {
			return true, nil
		}
	}
	return false, nil
}
