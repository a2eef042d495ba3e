package daemon

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
)

// collector is the publisher's source: the informer caches and the node. It
// logs once per network and message why a status.config was ignored.
type collector struct {
	objs network.Objects
	host network.Host
	node string
	log  klog.Logger
	// offered, when set, receives every computation of the offered networks.
	offered func([]network.Network)

	mu     sync.Mutex
	logged map[string]string
}

func newCollector(ctx context.Context, objs network.Objects, host network.Host, node string) *collector {
	return &collector{objs: objs, host: host, node: node, log: klog.FromContext(ctx), logged: map[string]string{}}
}

func (c *collector) Collect() ([]network.Network, []network.Skip, error) {
	nets, skips, err := network.Collect(c.objs, c.host, c.node)
	c.mu.Lock()
	defer c.mu.Unlock()
	logged := make(map[string]string, len(nets)) // only networks that still exist
	for _, n := range nets {
		key := n.Ref.Class + "/" + n.Ref.String()
		if n.StatusIgnored != "" && c.logged[key] != n.StatusIgnored {
			c.log.Info("Ignoring the network's status.config", "network", n.Ref.String(), "reason", "StatusConfigIgnored", "message", n.StatusIgnored)
		}
		logged[key] = n.StatusIgnored
	}
	c.logged = logged
	if err == nil && c.offered != nil {
		c.offered(nets)
	}
	return nets, skips, err
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

// claimGetter reads claims from the API server.
type claimGetter struct{ kube kubernetes.Interface }

func (g claimGetter) Claim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	return g.kube.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}
