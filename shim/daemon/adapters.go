package daemon

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
)

// collector is the publisher's source: the informer caches and the node.
type collector struct {
	objs network.Objects
	host network.Host
}

func (c collector) Collect() ([]network.Network, []network.Skip, error) {
	return network.Collect(c.objs, c.host)
}

// podGetter reads pods from the cache of this node's pods, and from the API
// server when the cache has not seen a pod yet.
type podGetter struct {
	cache  corelisters.PodLister
	client kubernetes.Interface
}

func (g podGetter) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if p, err := g.cache.Pods(namespace).Get(name); err == nil {
		return p, nil
	}
	return g.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// qosLister reads NetworkQoS objects from the informer cache.
type qosLister struct{ lister nclisters.NetworkQoSLister }

func (q qosLister) NetworkQoS(namespace string) ([]*ncv1.NetworkQoS, error) {
	return q.lister.NetworkQoSes(namespace).List(labels.Everything())
}

func labelsEverything() labels.Selector { return labels.Everything() }
