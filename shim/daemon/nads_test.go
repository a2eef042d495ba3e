package daemon

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
