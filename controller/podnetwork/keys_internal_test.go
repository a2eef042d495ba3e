package podnetwork

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/internal/harness"
)

// A ClusterNetwork's event queues every netclass PodNetwork on a segment:
// its Networks' segments moved (or went), and a conflict of theirs with a
// PodNetwork may have started or settled.
func TestAClusterNetworksEventQueuesThePodNetworksOnSegments(t *testing.T) {
	pn := func(name, provider, params string) *mnv1.PodNetwork {
		return &mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mnv1.PodNetworkSpec{Provider: provider, Parameters: runtime.RawExtension{Raw: []byte(params)}}}
	}
	env := harness.New(t, nil, []runtime.Object{
		&ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "trunk"}, Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVLAN}},
		pn("vxlan", "netclass.dev", `{"type":"netclass-vxlan","vni":10}`),
		pn("vlan", "netclass.dev", `{"type":"netclass-vlan","vlanId":10,"master":"eth1"}`),
		pn("vf", "netclass.dev", `{"type":"netclass-sriov"}`),
		pn("foreign", "other.example.com/x", `{"type":"netclass-vxlan","vni":10}`),
	})
	c, err := New(env.NC, env.NCInf, env.KubeInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	got := c.segmentKeys(&ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "trunk"}})
	slices.Sort(got)
	if want := []string{"vlan", "vxlan"}; !slices.Equal(got, want) {
		t.Fatalf("a ClusterNetwork's event queues %v, want %v", got, want)
	}
}
