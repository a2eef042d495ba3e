//go:build testbed

package kubectl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// `kubectl get netclass` lists an object of each of netclass's six kinds:
// every CRD is in the category netclass.
func TestGetNetclassListsEveryKind(t *testing.T) {
	e := harness.Bare(t)
	ns := testbed.Namespace(t, e.Kube)
	a := newAdmin(t)
	id := harness.Unique(6)
	objects := `apiVersion: multinetwork.networking.k8s.io/v1
kind: NetworkClass
metadata: {name: cat-` + id + `}
spec: {group: multinetwork.networking.k8s.io, version: v1, kind: PodNetwork}
---
apiVersion: multinetwork.networking.k8s.io/v1
kind: PodNetwork
metadata: {name: cat-` + id + `}
spec: {enabled: true, provider: example.com/other}
---
apiVersion: netclass.dev/v1alpha1
kind: ClusterNetwork
metadata: {name: cat-` + id + `}
spec: {type: netclass-vxlan, defaultOptions: {vxlan: {master: eth0}}}
---
apiVersion: netclass.dev/v1alpha1
kind: NodeNetwork
metadata: {name: cat-` + id + `.node}
spec: {clusterNetworkName: cat-` + id + `, nodeName: node}
---
apiVersion: netclass.dev/v1alpha1
kind: Network
metadata: {name: cat-` + id + `, namespace: ` + ns + `}
spec: {clusterNetworkName: cat-` + id + `, vni: 4242}
---
apiVersion: netclass.dev/v1alpha1
kind: NetworkQoS
metadata: {name: cat-` + id + `, namespace: ` + ns + `}
spec:
  priority: 10
  egress:
  - dscp: 10
    classifier: {to: [{ipBlock: {cidr: 10.0.0.0/8}}]}
`
	ctx := testbed.Context(t, time.Minute)
	t.Cleanup(func() {
		if out, err := a.run(context.Background(), objects, "delete", "--wait=false", "-f", "-"); err != nil {
			t.Errorf("delete the objects: %v\n%s", err, out)
		}
	})
	if out, err := a.run(ctx, objects, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := a.run(ctx, "", "get", "netclass", "--all-namespaces", "-o", "name")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"networkclass.multinetwork.networking.k8s.io/cat-" + id,
		"podnetwork.multinetwork.networking.k8s.io/cat-" + id,
		"clusternetwork.netclass.dev/cat-" + id,
		"nodenetwork.netclass.dev/cat-" + id + ".node",
		"network.netclass.dev/cat-" + id,
		"networkqos.netclass.dev/cat-" + id,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("kubectl get netclass does not list %s:\n%s", want, out)
		}
	}
}
