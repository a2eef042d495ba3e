//go:build testbed

// Package deploy runs netclass the way users deploy it (`go test -tags
// testbed ./test/deploy/` after `make testbed-up`), through the script of
// `make testbed-deploy` (scripts/testbed/deploy.sh): the image of
// scripts/image.sh imported into every node's containerd, and every manifest
// of conf/deploy applied, changed only where this test bed differs from a
// production cluster. netclass-controller and netclass-dra then run as the
// Deployment and the DaemonSet, with their service accounts' own tokens, and
// pods with claims get their interfaces on every node.
package deploy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The DaemonSet installs the plugins and serves every node, the Deployment's
// controller marks a PodNetwork Ready, and on every node two pods with claims
// on it get net1, report it in their claims' status and reach each other (a
// bridge is node-local: each pair is pinned to its node).
func TestDeployedNetclassAttachesPods(t *testing.T) {
	e := harness.Bare(t)
	hostFiles(t, e.Nodes, append(pluginPaths(t), "/var/lib/netclass")...)
	deploy(t, buildImage(t))
	draPods(t, e)
	for _, n := range e.Nodes {
		readyz(t, n, "http://127.0.0.1:9810/readyz") // the DaemonSet's --health-address, on the node's network
	}

	net := e.BridgeNet(t, "deploy", "net") // published by the DaemonSet's daemon of every node
	ns, pn := net.Namespace, net.PodNetwork
	e.WaitPodNetworkCondition(t, pn, "Ready", metav1.ConditionTrue) // set by the Deployment's controller
	before := mustScrape(t, e.Nodes[0], draMetrics)
	for i, n := range e.Nodes {
		pa, pb := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		e.RunPods(t, harness.PodOn(n.Name, ns, pa, "net"), harness.PodOn(n.Name, ns, pb, "net"))
		a, b := e.Attached(t, ns, pa, "net", "net1"), e.Attached(t, ns, pb, "net", "net1")
		if a.Pool != n.Name || b.Pool != n.Name {
			t.Fatalf("pods on node %s got devices of pools %s and %s", n.Name, a.Pool, b.Pool)
		}
		e.Ping(t, ns, pa, "net1", harness.Addr(t, b))
		e.Ping(t, ns, pb, "net1", harness.Addr(t, a))
	}
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionTrue)
	checkMetricsAfterTwoPods(t, e, e.Nodes[0], before, pn) // node 1 ran two of the pods (metrics.go)
}

// readyz checks that netclass-dra answers its readiness probe on a node.
func readyz(t *testing.T, n bed.Node, url string) {
	t.Helper()
	out, err := n.Output(testbed.Context(t, 30*time.Second), "curl", "-sf", "--max-time", "5", url)
	if err != nil || !strings.HasPrefix(out, "ok") { // "ok: <what it does>"; "ok" before v0.3
		t.Fatalf("readiness probe of node %s: %q (%v)", n.Name, out, err)
	}
}
