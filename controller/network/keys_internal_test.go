package network

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/internal/harness"
)

// A Network's event queues the Networks on the segments its spec names (on
// any ClusterNetwork, whatever its own makes of them) and itself, never the other Networks of its
// ClusterNetwork: a tenant's edit must not cost a reconcile of each of the
// thousands a shared ClusterNetwork may have.
func TestANetworksEventQueuesItsSegmentOnly(t *testing.T) {
	vni := func(v int32) *int32 { return &v }
	cn := func(name string) *ncv1.ClusterNetwork {
		return &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN}}
	}
	net := func(ns, name, cn string, id int32) *ncv1.Network {
		return &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: ncv1.NetworkSpec{ClusterNetworkName: cn, VNI: vni(id)}}
	}
	mine := net("t1", "mine", "overlay", 10)
	env := harness.New(t, nil, []runtime.Object{cn("overlay"), cn("overlay2"), mine,
		net("t2", "same-vni", "overlay", 10), net("t3", "same-vni-elsewhere", "overlay2", 10),
		net("t2", "sibling", "overlay", 11), net("t1", "sibling2", "overlay", 12),
		net("t4", "orphan", "gone", 10)})
	c, err := New(env.NC, env.NCInf, env.KubeInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	got := c.networkKeys(mine)
	slices.Sort(got)
	got = slices.Compact(got)
	if want := []string{"t1/mine", "t2/same-vni", "t3/same-vni-elsewhere"}; !slices.Equal(got, want) {
		t.Fatalf("an event of t1/mine queues %v, want %v", got, want)
	}
	// a Network whose ClusterNetwork went has no segment, but the Networks
	// it held one against must learn they may have it
	orphan, err := c.networks.Networks("t4").Get("orphan")
	if err != nil {
		t.Fatal(err)
	}
	got = c.networkKeys(orphan)
	slices.Sort(got)
	if want := []string{"t1/mine", "t2/same-vni", "t3/same-vni-elsewhere", "t4/orphan"}; !slices.Equal(got, want) {
		t.Fatalf("an event of t4/orphan (ClusterNetwork gone) queues %v, want %v", got, want)
	}
	// a ClusterNetwork's event: its Networks and those naming their IDs
	got = c.clusterKeys(cn("overlay2"))
	slices.Sort(got)
	got = slices.Compact(got)
	if want := []string{"t1/mine", "t2/same-vni", "t3/same-vni-elsewhere", "t4/orphan"}; !slices.Equal(got, want) {
		t.Fatalf("an event of ClusterNetwork overlay2 queues %v, want %v", got, want)
	}
	// a namespace's labels (namespaceSelectors read them): its Networks and
	// those on their segments
	got = c.namespaceKeys(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t1"}})
	slices.Sort(got)
	got = slices.Compact(got)
	if want := []string{"t1/mine", "t1/sibling2", "t2/same-vni", "t3/same-vni-elsewhere"}; !slices.Equal(got, want) {
		t.Fatalf("an event of namespace t1 queues %v, want %v", got, want)
	}
}
