//go:build testbed

// Package deploy runs netclass the way users deploy it (`go test -tags
// testbed ./test/deploy/` after `make testbed-up`): the image of
// scripts/image.sh imported into the test bed's containerd, and every
// manifest of conf/deploy applied, changed only where this test bed differs
// from a production cluster (see testbedAdapter). netclass-controller and
// netclass-dra then run as the Deployment and the DaemonSet, with their
// service accounts' own tokens, and a pod with a claim gets its interface.
package deploy

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The DaemonSet installs the plugins and serves the node, the Deployment's
// controller marks a PodNetwork Ready, and two pods with claims on it get
// net1, report it in their claims' status and reach each other.
func TestDeployedNetclassAttachesPods(t *testing.T) {
	e := harness.Bare(t)
	n := testbedNode(t)
	importImage(t, n, buildImage(t))
	hostFiles(t, append(pluginPaths(t), "/var/lib/netclass")...)
	adapt, err := testbedAdapter(e.Rest.Host, n)
	if err != nil {
		t.Fatal(err)
	}
	deploy(t, e, adapt)
	readyz(t, "http://127.0.0.1:9810/readyz") // the DaemonSet's --health-address

	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "dep"+harness.Unique(6), "deploy-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	e.WaitPodNetworkCondition(t, pn, "Ready", metav1.ConditionTrue)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, ns, "net", class, "", pn, nil)
	for _, p := range []string{"a", "b"} {
		e.CreatePod(t, harness.Pod(ns, p, "net"))
	}
	addrs := map[string]string{}
	for _, p := range []string{"a", "b"} {
		testbed.WaitForPodRunning(t, e.Kube, ns, p, 2*time.Minute)
		addrs[p] = attached(t, e, ns, p)
	}
	e.Ping(t, ns, "a", "net1", addrs["b"])
	e.Ping(t, ns, "b", "net1", addrs["a"])
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionTrue)
}

// attached checks that the pod's claim reports net1 Ready with what `ip`
// shows in the pod, and returns its address.
func attached(t *testing.T, e *harness.Env, ns, pod string) string {
	t.Helper()
	claim := e.ClaimOfPod(t, ns, pod, "net")
	_, entry := e.WaitClaimStatus(t, ns, claim.Name, func(d resourceapi.AllocatedDeviceStatus) bool {
		c := harness.ReadyCondition(d)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	nd := entry.NetworkData
	if nd == nil || nd.InterfaceName != "net1" || len(nd.IPs) == 0 {
		t.Fatalf("claim %s/%s: networkData %+v, want net1 with an address", ns, claim.Name, nd)
	}
	ifc := e.MustIface(t, ns, pod, "net1")
	if nd.HardwareAddress != ifc.MAC || !slices.Equal(nd.IPs, ifc.CIDRs) {
		t.Fatalf("claim %s/%s says net1 has %s %v; inside pod %s it has %s %v",
			ns, claim.Name, nd.HardwareAddress, nd.IPs, pod, ifc.MAC, ifc.CIDRs)
	}
	addr, _, _ := strings.Cut(nd.IPs[0], "/")
	return addr
}

// readyz checks that netclass-dra answers its readiness probe.
func readyz(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("readiness probe: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readiness probe: %s %s", resp.Status, body)
	}
}
