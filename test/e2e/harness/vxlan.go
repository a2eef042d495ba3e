package harness

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/testbed"
)

// AutoVXLANCluster creates a netclass-vxlan ClusterNetwork that leaves
// everything to the nodes: no master, no local address, no remotes (each
// node uses the device of its InternalIP; remotes are the other Ready
// nodes). It is deleted when the test ends.
func (e *Env) AutoVXLANCluster(t testing.TB) string {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	name := "e2e-auto-" + Unique(6)
	cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN,
			IPAM: &runtime.RawExtension{Raw: []byte(`{"type":"host-local"}`)}}}
	if _, err := e.NC.NetclassV1alpha1().ClusterNetworks().Create(ctx, cn, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterNetwork %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := e.NC.NetclassV1alpha1().ClusterNetworks().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ClusterNetwork %s: %v", name, err)
		}
	})
	return name
}
