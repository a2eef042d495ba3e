package daemon

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

var nadResource = schema.GroupVersionResource{Group: contract.NADGroup, Version: contract.NADVersion, Resource: contract.NADResource}

// nadInformer caches the NetworkAttachmentDefinitions as nadEntry (labels
// and netclass's annotation: what NetworkQoS NAD selectors read; the CNI
// network name of their config, never the config) when the API server
// serves them (Multus's CRD). When it does
// not, the cache is made once it does (watchNADs): Multus is often put in
// front of a running cluster, and the daemon need not restart for it;
// until then no NAD selector matches anything.
func (d *Daemon) nadInformer(ctx context.Context) error {
	d.nadLook = &nadLookup{namespaceLabels: d.namespaceLabels, kick: make(chan struct{}, 1)}
	served, err := serves(d.kube.Discovery(), nadResource.GroupVersion().String(), contract.NADResource)
	if err != nil || !served {
		return err
	}
	lister, err := d.newNADFactory()
	if err != nil {
		return err
	}
	d.nadLook.set(lister) // read once startInformers has synced it
	return nil
}

// newNADFactory makes the NAD cache (nadCache).
func (d *Daemon) newNADFactory() (cache.GenericLister, error) {
	client, err := dynamic.NewForConfig(d.cfg.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("create NetworkAttachmentDefinition client: %w", err)
	}
	fac, lister, err := nadCache(client)
	if err != nil {
		return nil, err
	}
	d.nadFac = fac
	return lister, nil
}

// nadCache is an informer factory of NADs and the lister of its cache. The
// objects are listed whole (a metadata-only list lacks the config) and cut
// down to nadEntry before the cache keeps them; the lister is the cache's
// own (the dynamic one asserts *unstructured.Unstructured).
func nadCache(client dynamic.Interface) (dynamicinformer.DynamicSharedInformerFactory, cache.GenericLister, error) {
	fac := dynamicinformer.NewDynamicSharedInformerFactory(client, 10*time.Minute)
	inf := fac.ForResource(nadResource).Informer()
	if err := inf.SetTransform(nadEntryOf); err != nil {
		return nil, nil, fmt.Errorf("NetworkAttachmentDefinition cache: %w", err)
	}
	return fac, cache.NewGenericLister(inf.GetIndexer(), nadResource.GroupResource()), nil
}

// watchNADs, when NADs were not served at start, waits until they are
// and caches them for the agent (nadWatch).
func (d *Daemon) watchNADs(ctx context.Context) {
	if d.nadFac != nil {
		return
	}
	w := nadWatch{
		discovery: d.kube.Discovery(),
		client:    func() (dynamic.Interface, error) { return dynamic.NewForConfig(d.cfg.RestConfig) },
		look:      d.nadLook,
		changed:   d.qos.Trigger,
	}
	w.run(ctx, crdPollPeriod)
}

// nadWatch makes the NAD cache once NADs are served: discovery tells, the
// cache is made with client's NADs, look reads it, and changed asks the
// agent for a sync.
type nadWatch struct {
	discovery resourceLister
	client    func() (dynamic.Interface, error)
	look      *nadLookup
	changed   func()
}

// run waits until NADs are served (looking every period, and at once, at
// most every crdKickInterval, when a Multus attachment needs them:
// nadLookup.wanted), then caches them, asks for a sync, and asks again at
// each NAD's change. The factory it makes is its own: it shuts it down when
// ctx ends (startInformers' stop knows only those of the start).
func (w nadWatch) run(ctx context.Context, period time.Duration) {
	k := laterKind{contract.NADKind, nadResource.GroupVersion().String(), contract.NADResource}
	if _, err := awaitServed(ctx, w.discovery, []laterKind{k}, period, w.look.kick, crdKickInterval); err != nil {
		return
	}
	logger := klog.FromContext(ctx)
	client, err := w.client()
	if err != nil {
		logger.Error(err, "NetworkAttachmentDefinitions are served now, but cannot be listed: NetworkQoS NAD selectors match nothing")
		return
	}
	fac, lister, err := nadCache(client)
	if err != nil {
		logger.Error(err, "NetworkAttachmentDefinitions are served now, but cannot be cached: NetworkQoS NAD selectors match nothing")
		return
	}
	changed := func(any) { w.changed() }
	if _, err := fac.ForResource(nadResource).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed,
	}); err != nil {
		logger.Error(err, "watch NetworkAttachmentDefinitions")
	}
	fac.Start(ctx.Done())
	defer fac.Shutdown()
	fac.WaitForCacheSync(ctx.Done())
	w.look.set(lister)
	logger.Info("NetworkAttachmentDefinitions are served now: NetworkQoS NAD selectors match")
	w.changed()
	<-ctx.Done()
}

// nadFactory is the NAD informer factory as startInformers starts it.
type nadFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
}

func (f nadFactory) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	out := map[reflect.Type]bool{}
	for gvr, ok := range f.DynamicSharedInformerFactory.WaitForCacheSync(stop) {
		out[reflect.TypeOf(gvr)] = out[reflect.TypeOf(gvr)] || ok
	}
	return out
}

// nadLookup describes NADs from the metadata cache and namespaces' labels
// (ruleagent.NADs).
type nadLookup struct {
	namespaceLabels func(string) (map[string]string, error)

	// kick asks watchNADs to look whether NADs are served now.
	kick chan struct{}

	mu     sync.Mutex
	lister cache.GenericLister // nil: NADs not cached (yet)
}

// wanted tells watchNADs that a NAD was looked up while NADs are not
// cached: a Multus attachment says they are served.
func (l *nadLookup) wanted() {
	if l == nil {
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// set makes the lookup read a cache.
func (l *nadLookup) set(lister cache.GenericLister) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lister = lister
}

func (l *nadLookup) meta(namespace, name string) *nadEntry {
	m, _ := l.entry(namespace, name)
	return m
}

// entry returns the NAD as cached (nil: no such NAD); cached is false
// while NADs are not cached (not served).
func (l *nadLookup) entry(namespace, name string) (e *nadEntry, cached bool) {
	if l == nil {
		return nil, false
	}
	l.mu.Lock()
	lister := l.lister
	l.mu.Unlock()
	if lister == nil {
		return nil, false
	}
	obj, err := lister.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil, true
	}
	e, _ = obj.(*nadEntry)
	return e, true
}

// NAD implements ruleagent.NADs.
func (l *nadLookup) NAD(namespace, name string) *render.NAD {
	m := l.meta(namespace, name)
	if m == nil {
		return nil
	}
	nsLabels, _ := l.namespaceLabels(namespace)
	return &render.NAD{Namespace: namespace, Name: name, Labels: m.Labels, NamespaceLabels: nsLabels}
}

// Generated implements ruleagent.NADs: a Network's NAD is in its own
// namespace, a PodNetwork's in the pod's; either bears netclass-controller's
// mark and names the network (a hand-written NAD of the same name does not
// count).
func (l *nadLookup) Generated(namespace string, net network.Network) *render.NAD {
	want, in := net.Ref.Name, namespace
	if net.Ref.Namespace != "" {
		want, in = net.Ref.Namespace+"/"+net.Ref.Name, net.Ref.Namespace
	}
	m := l.meta(in, net.Ref.Name)
	if m == nil || net.IsNAD() || m.Labels[contract.NADManagedByLabel] != contract.Provider || m.Annotations[contract.NADNetworkAnnotation] != want {
		return nil
	}
	return l.NAD(in, net.Ref.Name)
}
