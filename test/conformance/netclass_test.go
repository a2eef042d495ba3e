//go:build testbed

package conformance_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/conformance"
	"github.com/netclass-dev/netclass/test/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

func cluster(e *harness.Env) conformance.Cluster {
	return conformance.Cluster{Rest: e.Rest, Kube: e.Kube, Node: e.Node}
}

// netclass passes the NetworkClass proposal's checks with a PodNetwork (netclass-bridge).
func TestNetclassPodNetwork(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge := "cf" + harness.Unique(6)
	t.Cleanup(func() { harness.DeleteLinks(t, bridge) })
	pn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multinetwork.networking.k8s.io/v1", "kind": "PodNetwork",
		"metadata": map[string]any{"name": "conformance-" + harness.Unique(6)},
		"spec":     map[string]any{"provider": contract.DriverName, "parameters": harness.BridgeParams(bridge, harness.RandomSubnet())},
	}}
	e.ForgetNetwork(pn.GetName(), 0)
	conformance.Run(t, cluster(e), conformance.Implementation{
		Driver: contract.DriverName, NetworkClass: class, DeviceClass: class,
		Networks: []*unstructured.Unstructured{pn}, CheckInPod: true,
	})
	// The advertisement check tells drivers and classes apart.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct{ driver, class string }{{"other.example.com", class}, {contract.DriverName, class + "-x"}} {
		if got, err := conformance.FindAdvertised(ctx, e.Kube, c.driver, c.class, "", pn.GetName()); err != nil || len(got) != 0 {
			t.Errorf("driver %s class %s: found %v (%v), want nothing", c.driver, c.class, got, err)
		}
	}
}

// netclass passes the NetworkClass proposal's checks with a namespaced Network (netclass-vxlan).
func TestNetclassNetwork(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.NetworkKind)
	vni := harness.RandomVNI()
	clusterNet := e.VXLANCluster(t, vni)
	n := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "netclass.dev/v1alpha1", "kind": "Network",
		"metadata": map[string]any{"name": "conformance"},
		"spec": map[string]any{"clusterNetworkName": clusterNet, "vni": int64(vni),
			"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": harness.RandomSubnet()}}}}},
	}}
	conformance.Run(t, cluster(e), conformance.Implementation{
		Driver: contract.DriverName, NetworkClass: class, DeviceClass: class,
		Networks: []*unstructured.Unstructured{n}, CheckInPod: true, Timeout: 2 * time.Minute,
		Setup: func(_ *testing.T, ns string) { e.ForgetNetwork(ns+"_conformance", vni) },
	})
}
