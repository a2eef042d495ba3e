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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The DaemonSet installs the plugins and serves the node, the Deployment's
// controller marks a PodNetwork Ready, and two pods with claims on it get
// net1, report it in their claims' status and reach each other.
func TestDeployedNetclassAttachesPods(t *testing.T) {
	e := harness.Bare(t)
	bed := testbedNode(t)
	importImage(t, bed, buildImage(t))
	hostFiles(t, append(pluginPaths(t), "/var/lib/netclass")...)
	adapt, err := testbedAdapter(e.Rest.Host, bed)
	if err != nil {
		t.Fatal(err)
	}
	deploy(t, e, adapt)
	readyz(t, "http://127.0.0.1:9810/readyz") // the DaemonSet's --health-address

	n := e.BridgeNet(t, "deploy", "net") // published by the DaemonSet's daemon
	ns, pn := n.Namespace, n.PodNetwork
	e.WaitPodNetworkCondition(t, pn, "Ready", metav1.ConditionTrue) // set by the Deployment's controller
	before := mustScrape(t, draMetrics)
	e.RunPods(t, harness.Pod(ns, "a", "net"), harness.Pod(ns, "b", "net"))
	a, b := e.Attached(t, ns, "a", "net", "net1"), e.Attached(t, ns, "b", "net", "net1")
	e.Ping(t, ns, "a", "net1", harness.Addr(t, b))
	e.Ping(t, ns, "b", "net1", harness.Addr(t, a))
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionTrue)
	checkMetricsAfterTwoPods(t, before, pn) // metrics.go
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
