package daemon

import (
	"context"
	"fmt"
	"reflect"
	"time"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	mnpclient "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/clientset/versioned"
	mnpinformers "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/informers/externalversions"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/shim/netpolicy"
)

// multiResource is the MultiNetworkPolicy's resource name.
const multiResource = "multi-networkpolicies"

// multiInformer caches the MultiNetworkPolicies when the API server serves
// them (their CRD is installed: conf/crd/thirdparty). When it does not,
// there are none to enforce: the daemon says so, does not watch them, and
// restarts when they are served (watchLaterKinds).
func (d *Daemon) multiInformer(ctx context.Context) error {
	served, err := d.servedOrLater(ctx, laterKind{"MultiNetworkPolicy", mnpv1beta1.SchemeGroupVersion.String(), multiResource})
	if err != nil || !served {
		return err
	}
	client, err := mnpclient.NewForConfig(d.cfg.RestConfig)
	if err != nil {
		return fmt.Errorf("create MultiNetworkPolicy client: %w", err)
	}
	d.multiFac = mnpinformers.NewSharedInformerFactory(client, 10*time.Minute)
	d.multiFac.K8sCniCncfIo().V1beta1().MultiNetworkPolicies().Informer()
	return nil
}

// multiPolicies lists a namespace's MultiNetworkPolicies from the cache
// (nil when they are not watched).
func (d *Daemon) multiPolicies() func(namespace string) ([]*mnpv1beta1.MultiNetworkPolicy, error) {
	if d.multiFac == nil {
		return nil
	}
	lister := d.multiFac.K8sCniCncfIo().V1beta1().MultiNetworkPolicies().Lister()
	return func(ns string) ([]*mnpv1beta1.MultiNetworkPolicy, error) {
		return lister.MultiNetworkPolicies(ns).List(labels.Everything())
	}
}

// policyObject returns a policy of either kind from the caches, with its
// kind set, for the Events about it.
func (d *Daemon) policyObject(kind, ns, name string) (runtime.Object, error) {
	if kind == netpolicy.KindClusterNetworkPolicy {
		return d.clusterObject(name)
	}
	if kind != netpolicy.KindMultiNetworkPolicy {
		p, err := d.polFac.Networking().V1().NetworkPolicies().Lister().NetworkPolicies(ns).Get(name)
		if err != nil {
			return nil, err
		}
		p = p.DeepCopy()
		p.APIVersion, p.Kind = "networking.k8s.io/v1", netpolicy.KindNetworkPolicy
		return p, nil
	}
	if d.multiFac == nil {
		return nil, fmt.Errorf("MultiNetworkPolicy %s/%s: not watched", ns, name)
	}
	p, err := d.multiFac.K8sCniCncfIo().V1beta1().MultiNetworkPolicies().Lister().MultiNetworkPolicies(ns).Get(name)
	if err != nil {
		return nil, err
	}
	p = p.DeepCopy()
	p.APIVersion, p.Kind = mnpv1beta1.SchemeGroupVersion.String(), netpolicy.KindMultiNetworkPolicy
	return p, nil
}

// informerFactory is what starting the daemon's informer factories needs.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool
}

// startInformers starts every informer factory and waits for their
// caches; stop shuts down those that can be (the others end with ctx).
func (d *Daemon) startInformers(ctx context.Context) (stop func(), err error) {
	facs := []informerFactory{d.factory, d.nodeFac, d.podFac, d.peerFac, d.polFac}
	if d.multiFac != nil {
		facs = append(facs, d.multiFac)
	}
	if d.clusterFac != nil {
		facs = append(facs, d.clusterFac)
	}
	if d.nadFac != nil {
		facs = append(facs, nadFactory{d.nadFac})
	}
	for _, f := range facs {
		f.Start(ctx.Done())
	}
	stop = func() {
		for _, f := range facs {
			if s, ok := f.(interface{ Shutdown() }); ok {
				s.Shutdown()
			}
		}
	}
	for _, f := range facs {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				stop()
				return nil, fmt.Errorf("informer cache of %v did not sync", typ)
			}
		}
	}
	return stop, nil
}
