package segment_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/netclass-dev/netclass/api/contract"
	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/segment"
)

// cluster is a random set of network objects, in informer caches with the
// segment index.
type cluster struct {
	listers segment.Listers
	pns     []*mnv1.PodNetwork
	nets    []*ncv1.Network
	cns     []*ncv1.ClusterNetwork
}

func clusterNetworks() []*ncv1.ClusterNetwork {
	vlan := func(name, master string) *ncv1.ClusterNetwork {
		cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVLAN}}
		if master != "" {
			cn.Spec.DefaultOptions = &ncv1.Options{VLAN: &ncv1.VLANOptions{Master: ncv1.InterfaceName(master)}}
		}
		return cn
	}
	return []*ncv1.ClusterNetwork{
		{ObjectMeta: metav1.ObjectMeta{Name: "overlay"}, Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN}},
		vlan("trunk1", "eth1"), vlan("trunk2", "eth2"), vlan("anytrunk", ""),
	}
}

// newCluster makes n Networks and m PodNetworks with segment IDs among ids.
func newCluster(t testing.TB, r *rand.Rand, n, m, ids int) *cluster {
	c := &cluster{cns: clusterNetworks()}
	netIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := netIdx.AddIndexers(cache.Indexers{segment.ByID: segment.IndexID}); err != nil {
		t.Fatal(err)
	}
	pnIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	cnIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, cn := range c.cns {
		add(t, cnIdx, cn)
	}
	created := func() metav1.Time { return metav1.NewTime(time.Unix(int64(r.IntN(5)), 0)) }
	for i := range n {
		id := int32(1 + r.IntN(ids))
		nw := &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("t%d", r.IntN(3)), Name: fmt.Sprintf("n%d", i), CreationTimestamp: created()},
			Spec: ncv1.NetworkSpec{ClusterNetworkName: c.cns[r.IntN(len(c.cns)+1)%len(c.cns)].Name}}
		switch r.IntN(3) {
		case 0:
			nw.Spec.VNI = &id
		case 1:
			nw.Spec.VLANID = &id
		default:
			nw.Spec.ClusterNetworkName = "missing"
			nw.Spec.VNI = &id
		}
		add(t, netIdx, nw)
		c.nets = append(c.nets, nw)
	}
	for i := range m {
		params := []string{
			`{"type":"netclass-vxlan","vni":%d}`, `{"type":"netclass-vlan","vlanId":%d,"master":"eth1"}`,
			`{"type":"netclass-vlan","vlanId":%d}`, `{"type":"netclass-sriov","vlan":%d}`, `{"type":"netclass-bridge","bridge":"br%d"}`,
		}[r.IntN(5)]
		pn := &mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), CreationTimestamp: created()},
			Spec: mnv1.PodNetworkSpec{Provider: contract.Provider, Parameters: runtime.RawExtension{Raw: fmt.Appendf(nil, params, 1+r.IntN(ids))}}}
		add(t, pnIdx, pn)
		c.pns = append(c.pns, pn)
	}
	c.listers = segment.Listers{PodNetworks: mnlisters.NewPodNetworkLister(pnIdx), Networks: netIdx,
		ClusterNetworks: nclisters.NewClusterNetworkLister(cnIdx)}
	return c
}

func add(t testing.TB, idx cache.Indexer, obj any) {
	if err := idx.Add(obj); err != nil {
		t.Fatal(err)
	}
}

// Owner over what Overlapping lists answers as over every holder, for every
// Network and PodNetwork: VXLAN, VLAN on named masters and masters left to
// the node, SR-IOV VLANs, bridges, Networks without their ClusterNetwork,
// equal creation times.
func TestOverlappingDecidesAsEveryHolder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 100 {
		c := newCluster(t, r, r.IntN(30), r.IntN(10), 4)
		all := netspec.Holders(c.pns, c.nets, c.cns, nil)
		for _, h := range all {
			some, err := c.listers.Overlapping(h.Segment)
			if err != nil {
				t.Fatal(err)
			}
			want, got := netspec.Owner(h, all), netspec.Owner(h, some)
			if (want == nil) != (got == nil) || want != nil && want.String() != got.String() {
				t.Fatalf("round %d: owner of %s (%s) from the overlapping objects is %v, from all %v", round, h, h.Segment, got, want)
			}
		}
	}
}

// Deciding the owner of one Network among 10,000 (a reconcile) reads the
// Networks of its segment ("indexed"), not all of them ("every holder", as
// before).
func BenchmarkOwnerAmong10000Networks(b *testing.B) {
	c := newCluster(b, rand.New(rand.NewPCG(5, 6)), 10000, 20, 4000)
	vni := int32(7)
	nw := &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "mine"}, Spec: ncv1.NetworkSpec{ClusterNetworkName: "overlay", VNI: &vni}}
	self := netspec.NetworkHolder(nw, c.cns[0], nil)
	b.Run("indexed", func(b *testing.B) {
		for b.Loop() {
			some, err := c.listers.Overlapping(self.Segment)
			if err != nil {
				b.Fatal(err)
			}
			netspec.Owner(self, some)
		}
	})
	b.Run("every holder", func(b *testing.B) {
		for b.Loop() {
			netspec.Owner(self, netspec.Holders(c.pns, c.nets, c.cns, nil))
		}
	})
}
