//go:build testbed

package kubectl

import (
	"context"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// kubectl apply of bad netclass parameters is refused by the API server,
// the message naming the field; good ones are admitted.
func TestBadParametersAreRefusedAtApply(t *testing.T) {
	e := harness.Bare(t)
	ns := testbed.Namespace(t, e.Kube)
	tenant := e.Tenant(t, ns)
	asTenant := func(ctx context.Context, yaml string) (string, error) {
		return tenant.Kubectl(ctx, yaml, "apply", "-f", "-")
	}
	dryRun := func(ctx context.Context, yaml string) (string, error) {
		return tenant.Kubectl(ctx, yaml, "apply", "--dry-run=server", "-f", "-")
	}
	installPolicy(t, e, dryRun)
	a := newAdmin(t)
	asAdmin := func(ctx context.Context, yaml string) (string, error) { return a.run(ctx, yaml, "apply", "-f", "-") }

	const field = "spec.devices.config[0].opaque.parameters"
	refused(t, asTenant, "a claim with interfaceName eth0", claim("eth0", "interfaceName: eth0"),
		field+".interfaceName: eth0 is taken by the pod's loopback or primary interface")
	refused(t, asTenant, "a claim with an unknown field", claim("unknown", "interfacename: net1"),
		field+": unknown field interfacename")
	refused(t, asTenant, "a claim with a multicast MAC", claim("mac", "mac: 01:00:5e:00:00:01"),
		field+".mac: must be a unicast MAC address")
	refused(t, asTenant, "a claim with a network address", claim("ips", "ips: [10.10.1.0/24]"),
		field+".ips[0]: is the network address of its prefix")
	refused(t, asTenant, "a claim with DSCP 64", claim("dscp", "qos: {dscp: 64}"),
		field+".qos.dscp: must be an integer between 0 and 63")
	refused(t, asTenant, "a claim template with a rate and no burst", `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: rate
spec:
  spec:
    devices:
      requests:
      - name: net
        exactly:
          deviceClassName: netclass
      config:
      - opaque:
          driver: netclass.dev
          parameters: {apiVersion: netclass.dev/v1alpha1, kind: AttachmentConfig, qos: {egressRate: 1000000}}
`, "spec.spec.devices.config[0].opaque.parameters.qos.egressBurst: is required when egressRate is set")
	admitted(t, asTenant, "a good claim", claim("good", `
interfaceName: data0
mac: 02:00:00:00:10:01
ips: [10.10.1.50/24]
qos: {dscp: 46, egressRate: 10000000, egressBurst: 200000}`))
	if out, err := tenant.Kubectl(testbed.Context(t, time.Minute), "", "get", "resourceclaim", "good"); err != nil {
		t.Errorf("the good claim is not there: %v\n%s", err, out)
	}

	bad := "bad-" + harness.Unique(6)
	refused(t, asAdmin, "a PodNetwork of an unknown plugin type", podNetwork(bad, "type: netclass-bogus\nbridge: x0"),
		"spec.parameters.type: must be one of netclass-bridge, netclass-vlan, netclass-vxlan, netclass-sriov")
	refused(t, asAdmin, "a PodNetwork with DSCP 99", podNetwork(bad, "type: netclass-bridge\nbridge: x0\nqos: {dscp: 99}"),
		"spec.parameters.qos.dscp: must be an integer between 0 and 63")
	good := "good-" + harness.Unique(6)
	admitted(t, asAdmin, "a good PodNetwork", podNetwork(good, "type: netclass-bridge\nbridge: x0\nipam: {type: host-local, ranges: [[{subnet: 10.10.9.0/24}]]}"))
	t.Cleanup(func() {
		if out, err := a.run(context.Background(), "", "delete", "podnetwork", good, "--wait=false"); err != nil {
			t.Errorf("delete PodNetwork %s: %v\n%s", good, err, out)
		}
	})
	refused(t, asTenant, "a Network whose ipam type is a number", `apiVersion: netclass.dev/v1alpha1
kind: Network
metadata:
  name: red
spec:
  clusterNetworkName: trunk
  vni: 4243
  ipam: {type: 5}
`, "spec.ipam.type: must be a string")
}
