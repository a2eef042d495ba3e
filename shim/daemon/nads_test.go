package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

func nadMeta(ns, name string, labels, annotations map[string]string) *nadEntry {
	return &nadEntry{PartialObjectMetadata: metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations}}}
}

// A claim attachment's network has a generated NAD only where
// netclass-controller made one for it: in the Network's namespace (a
// PodNetwork's: the pod's), marked as its, naming that network; a
// hand-written NAD of the same name, or one naming another network, is
// not its.
func TestGeneratedNAD(t *testing.T) {
	mark := map[string]string{contract.NADManagedByLabel: contract.Provider, "tier": "storage"}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, m := range []*nadEntry{
		nadMeta("blue", "vx", mark, map[string]string{contract.NADNetworkAnnotation: "blue/vx"}),
		nadMeta("t1", "pn", mark, map[string]string{contract.NADNetworkAnnotation: "pn"}),
		nadMeta("blue", "hand", map[string]string{"tier": "storage"}, map[string]string{contract.NADNetworkAnnotation: "blue/hand"}),
		nadMeta("blue", "other", mark, map[string]string{contract.NADNetworkAnnotation: "blue/vx"}),
	} {
		if err := idx.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	l := &nadLookup{namespaceLabels: func(ns string) (map[string]string, error) { return map[string]string{"ns": ns}, nil }}
	netw := func(ns, name string) network.Network {
		kind := "Network"
		if ns == "" {
			kind = "PodNetwork"
		}
		return network.Network{Ref: attachment.NetworkRef{Kind: kind, Namespace: ns, Name: name}}
	}
	if got := l.Generated("blue", netw("blue", "vx")); got != nil {
		t.Fatalf("before the cache is set: %+v", got)
	}
	l.set(cache.NewGenericLister(idx, nadResource.GroupResource()))
	for _, c := range []struct {
		podNS  string
		net    network.Network
		want   bool
		wantNS string
	}{
		{"blue", netw("blue", "vx"), true, "blue"},
		{"t1", netw("", "pn"), true, "t1"},
		{"t2", netw("", "pn"), false, ""},
		{"blue", netw("blue", "hand"), false, ""},
		{"blue", netw("blue", "other"), false, ""},
		{"blue", netw("blue", "absent"), false, ""},
	} {
		got := l.Generated(c.podNS, c.net)
		if (got != nil) != c.want || got != nil && (got.Namespace != c.wantNS || got.Labels["tier"] != "storage" || got.NamespaceLabels["ns"] != c.wantNS) {
			t.Errorf("pod in %s, network %+v: %+v, want one: %v", c.podNS, c.net.Ref, got, c.want)
		}
	}
}

// nadsServed is discovery that serves NADs once served is set; each
// question is signalled on asked (when it has room).
type nadsServed struct {
	served atomic.Bool
	asked  chan struct{}
}

func (s *nadsServed) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	select {
	case s.asked <- struct{}{}:
	default:
	}
	if s.served.Load() && gv == nadResource.GroupVersion().String() {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: contract.NADResource}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
}

// NADs served after the daemon started are cached once discovery says so,
// the agent is asked for a sync then and at each NAD's change, and the
// watch ends with its context.
func TestWatchNADsCachesThemOnceServed(t *testing.T) {
	client := nadClient(t, nadObject("t1", "hand", nil, nil, `{"cniVersion":"1.0.0","name":"blue","type":"netclass-bridge"}`))
	dc := &nadsServed{asked: make(chan struct{}, 1)}
	look := &nadLookup{kick: make(chan struct{}, 1)}
	changed := make(chan struct{}, 1)
	w := nadWatch{discovery: dc, client: func() (dynamic.Interface, error) { return client, nil }, look: look,
		changed: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, time.Millisecond) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(30 * time.Second)
	for range 3 {
		select {
		case <-dc.asked:
		case <-deadline:
			t.Fatal("discovery not asked")
		}
	}
	if _, cached := look.entry("t1", "hand"); cached {
		t.Fatal("NADs cached before they are served")
	}
	select {
	case <-changed:
		t.Fatal("a sync asked for before NADs are served")
	default:
	}
	dc.served.Store(true)
	seen := func(name string) {
		for {
			if e, cached := look.entry("t1", name); cached && e != nil {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("t1/%s not cached, or no sync asked for, once NADs are served", name)
			}
		}
	}
	seen("hand")
	if _, err := client.Resource(nadResource).Namespace("t1").Create(ctx, nadObject("t1", "later", nil, nil, ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen("later")
	cancel()
	select {
	case <-done:
	case <-deadline:
		t.Fatal("the watch did not end with its context")
	}
}
