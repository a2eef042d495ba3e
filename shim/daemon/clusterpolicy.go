package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	cnpinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/netclass-dev/netclass/api/contract"
)

// clusterResource is the ClusterNetworkPolicy's resource name.
const clusterResource = "clusternetworkpolicies"

// clusterInformer caches the ClusterNetworkPolicies labelled for netclass
// (the others are never seen) when the API server serves them (their CRD
// is installed: conf/crd/thirdparty). When it does not, there are none to
// enforce: the daemon says so, does not watch them, and restarts when they
// are served (watchLaterKinds).
func (d *Daemon) clusterInformer(ctx context.Context) error {
	served, err := d.servedOrLater(ctx, laterKind{"ClusterNetworkPolicy", cnpv1beta1.GroupVersion.String(), clusterResource})
	if err != nil || !served {
		return err
	}
	client, err := cnpclient.NewForConfig(d.cfg.RestConfig)
	if err != nil {
		return fmt.Errorf("create ClusterNetworkPolicy client: %w", err)
	}
	d.clusterFac = cnpinformers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		cnpinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{contract.PolicyControllerLabel: contract.PolicyController}).String()
		}))
	d.clusterFac.Policy().V1beta1().ClusterNetworkPolicies().Informer()
	return nil
}

// servedOrLater reports whether the API server serves the kind; when it
// does not, the daemon says so and watches for it (watchLaterKinds: the
// daemon restarts once it is served).
func (d *Daemon) servedOrLater(ctx context.Context, k laterKind) (bool, error) {
	served, err := serves(d.kube.Discovery(), k.groupVersion, k.resource)
	if err != nil || served {
		return served, err
	}
	klog.FromContext(ctx).Info(k.kind+" is not served by the API server: none to enforce; the daemon restarts when it is",
		"groupVersion", k.groupVersion)
	d.later = append(d.later, k)
	return false, nil
}

// serves reports whether the API server serves the resource of the group
// version.
func serves(dc resourceLister, gv, resource string) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover the resources of %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// clusterPolicies lists the ClusterNetworkPolicies from the cache (nil
// when they are not watched).
func (d *Daemon) clusterPolicies() func() ([]*cnpv1beta1.ClusterNetworkPolicy, error) {
	if d.clusterFac == nil {
		return nil
	}
	lister := d.clusterFac.Policy().V1beta1().ClusterNetworkPolicies().Lister()
	return func() ([]*cnpv1beta1.ClusterNetworkPolicy, error) { return lister.List(labels.Everything()) }
}

// clusterObject returns a ClusterNetworkPolicy from the cache, with its
// kind set, for the Events about it.
func (d *Daemon) clusterObject(name string) (runtime.Object, error) {
	if d.clusterFac == nil {
		return nil, fmt.Errorf("ClusterNetworkPolicy %s: not watched", name)
	}
	p, err := d.clusterFac.Policy().V1beta1().ClusterNetworkPolicies().Lister().Get(name)
	if err != nil {
		return nil, err
	}
	p = p.DeepCopy()
	p.APIVersion, p.Kind = cnpv1beta1.GroupVersion.String(), "ClusterNetworkPolicy"
	return p, nil
}

// namespaceLabels reads a namespace's labels from the peers' cache.
func (d *Daemon) namespaceLabels(ns string) (map[string]string, error) {
	n, err := d.peerFac.Core().V1().Namespaces().Lister().Get(ns)
	if err != nil {
		return nil, err
	}
	return n.Labels, nil
}
