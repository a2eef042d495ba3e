package daemon

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

var nadResource = schema.GroupVersionResource{Group: contract.NADGroup, Version: contract.NADVersion, Resource: contract.NADResource}

// nadInformer caches the NetworkAttachmentDefinitions' metadata (labels
// and annotations: what NetworkQoS NAD selectors read; never their
// configs) when the API server serves them (Multus's CRD). When it does
// not, the cache is made once it does (watchNADs): Multus is often put in
// front of a running cluster, and the daemon need not restart for it;
// until then no NAD selector matches anything.
func (d *Daemon) nadInformer(ctx context.Context) error {
	d.nadLook = &nadLookup{namespaceLabels: d.namespaceLabels}
	served, err := serves(d.kube.Discovery(), nadResource.GroupVersion().String(), contract.NADResource)
	if err != nil || !served {
		return err
	}
	return d.newNADFactory()
}

func (d *Daemon) newNADFactory() error {
	client, err := metadata.NewForConfig(d.cfg.RestConfig)
	if err != nil {
		return fmt.Errorf("create NetworkAttachmentDefinition metadata client: %w", err)
	}
	d.nadFac = metadatainformer.NewSharedInformerFactory(client, 10*time.Minute)
	d.nadLook.set(d.nadFac.ForResource(nadResource).Lister())
	return nil
}

// watchNADs, when NADs were not served at start, waits until they are,
// then caches them and asks the agent for a sync.
func (d *Daemon) watchNADs(ctx context.Context) {
	if d.nadFac != nil {
		return
	}
	k := laterKind{contract.NADKind, nadResource.GroupVersion().String(), contract.NADResource}
	if _, err := awaitServed(ctx, d.kube.Discovery(), []laterKind{k}, crdPollPeriod); err != nil {
		return
	}
	logger := klog.FromContext(ctx)
	if err := d.newNADFactory(); err != nil {
		logger.Error(err, "NetworkAttachmentDefinitions are served now, but cannot be cached: NetworkQoS NAD selectors match nothing")
		return
	}
	inf := d.nadFac.ForResource(nadResource).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { d.qos.Trigger() }, UpdateFunc: func(any, any) { d.qos.Trigger() }, DeleteFunc: func(any) { d.qos.Trigger() },
	}); err != nil {
		logger.Error(err, "watch NetworkAttachmentDefinitions")
	}
	d.nadFac.Start(ctx.Done())
	d.nadFac.WaitForCacheSync(ctx.Done())
	logger.Info("NetworkAttachmentDefinitions are served now: NetworkQoS NAD selectors match")
	d.qos.Trigger()
}

// nadFactory is the metadata informer factory as startInformers starts it.
type nadFactory struct {
	metadatainformer.SharedInformerFactory
}

func (f nadFactory) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	out := map[reflect.Type]bool{}
	for gvr, ok := range f.SharedInformerFactory.WaitForCacheSync(stop) {
		out[reflect.TypeOf(gvr)] = out[reflect.TypeOf(gvr)] || ok
	}
	return out
}

// nadLookup describes NADs from the metadata cache and namespaces' labels
// (ruleagent.NADs).
type nadLookup struct {
	namespaceLabels func(string) (map[string]string, error)

	mu     sync.Mutex
	lister cache.GenericLister // nil: NADs not cached (yet)
}

// set makes the lookup read a cache.
func (l *nadLookup) set(lister cache.GenericLister) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lister = lister
}

func (l *nadLookup) meta(namespace, name string) *metav1.PartialObjectMetadata {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	lister := l.lister
	l.mu.Unlock()
	if lister == nil {
		return nil
	}
	obj, err := lister.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
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
