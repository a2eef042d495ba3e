//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// routedPrimary makes the node's primary network the upstream ptp plugin
// (host ends routed, in no bridge, as Calico's are), built from the
// version go.mod pins, with the node's pod subnet: what a node of a
// cluster with a routed primary CNI is.
func routedPrimary(t *testing.T, n bed.Node) {
	t.Helper()
	bin := filepath.Join(n.HostPath(n.CNIBinDir), "ptp")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/containernetworking/plugins/plugins/main/ptp")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the ptp plugin: %v\n%s", err, out)
	}
	conf := fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "netclass-testbed", "plugins": [
  {"type": "ptp", "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]],
    "routes": [{"dst": "10.250.0.0/24"}, {"dst": "10.252.0.0/16"}]}},
  {"type": "loopback"}]}`, n.PodSubnet, n.PodGateway)
	dir := n.HostPath(n.CNIConfDir)
	if err := os.WriteFile(filepath.Join(dir, "10-netclass-testbed.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The seed's port example (its NetworkAttachmentDefinitions selection
// made DefaultNetwork) on a node whose primary CNI is ptp (a third node,
// added for the test): the rules go to the pod's routed host end, in
// netclass's own table hooked at its ingress, and mark the pod's SYNs to
// TCP 443, seen on the underlay as they leave the node, not those to 22;
// deleting the object removes the table and leaves the host end's qdiscs
// as they were.
func TestNetworkQoSOnARoutedPrimary(t *testing.T) {
	e := harness.Shared(t)
	n3 := e.AddNode(t, "")
	routedPrimary(t, n3)
	ns := testbed.Namespace(t, e.Kube)
	e.RunPods(t, primaryPod(n3, ns, "web", map[string]string{"app": "web"}))
	ip, host := getPod(t, e, ns, "web").Status.PodIP, hostEnd(t, e, n3, ns, "web")
	if out, err := n3.Output(testbed.Context(t, time.Minute), "bridge", "link", "show", "dev", host); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("the host end %s is a bridge port (%q, %v): not the routed primary this test is about", host, out, err)
	}
	before, err := n3.Output(testbed.Context(t, time.Minute), "tc", "qdisc", "show", "dev", host)
	if err != nil {
		t.Fatal(err)
	}
	port := seedObjects(t, "seed003-networkqos-secondary-network.yaml", ns)[0]
	port.Spec.NetworkSelectors = ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.DefaultNetwork}}
	b := &qosPrimaryBed{t: t, e: e, n: n3, ns: ns, ip: map[string]string{"web": ip}, host: map[string]string{"web": host}}
	b.create(port)
	n1 := e.Nodes[0]
	underlay := &nstest.NS{Name: n1.Name, Path: n1.NetNSPath()}
	send := func(p uint16) func() { return func() { synTo(t, e, ns, "web", n1.IP, p) } }
	primarySeenAt(t, underlay, n1.UnderlayIf, ip, n1.IP, tcpTo(443), 11, send(443), "the port example: TCP 443 from the routed pod")
	primarySeenAt(t, underlay, n1.UnderlayIf, ip, n1.IP, tcpTo(22), 0, send(22), "the port example: TCP 22 from the routed pod")
	table := "netclass_in_" + host
	if out, err := n3.Output(testbed.Context(t, time.Minute), "nft", "list", "tables"); err != nil || !strings.Contains(out, table) {
		t.Errorf("node %s has no table %s: %v\n%s", n3.Name, table, err, out)
	}
	b.delete(port.Name)
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "table "+table+" removed",
		func(ctx context.Context) (bool, string, error) {
			out, err := n3.Output(ctx, "nft", "list", "tables")
			return err == nil && !strings.Contains(out, table), out, err
		})
	if after, err := n3.Output(testbed.Context(t, time.Minute), "tc", "qdisc", "show", "dev", host); err != nil || after != before {
		t.Errorf("the host end's qdiscs changed: before %q, after %q (%v)", before, after, err)
	}
}
