//go:build testbed

package testbed_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// The underlay joins every node to every other: a VXLAN datagram (UDP 4789) sent from one
// node's underlay address arrives on the other's underlay interface with both addresses
// untouched (no NAT). Every node reaches the API server at its underlay address, and no node
// has a route off the test bed.
func TestUnderlay(t *testing.T) {
	c := testbed.Client(t)
	b := testbed.Bed(t)
	nodes := testbed.Nodes(t, c)
	ctx := testbed.Context(t, 2*time.Minute)
	for _, dst := range nodes {
		sniffer, err := traffic.Sniff(&nstest.NS{Name: "node " + dst.Name, Path: dst.NetNSPath()}, dst.UnderlayIf)
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range nodes {
			if src.Name == dst.Name {
				continue
			}
			// bash's /dev/udp: one datagram from src's own stack to dst's VXLAN port
			if _, err := src.Output(ctx, "bash", "-c", fmt.Sprintf("echo probe >/dev/udp/%s/4789", dst.IP)); err != nil {
				t.Fatal(err)
			}
			from, to := netip.MustParseAddr(src.IP), netip.MustParseAddr(dst.IP)
			got := sniffer.WaitFor(func(p traffic.Packet) bool {
				return p.Src == from && p.Dst == to && p.Proto == 17 && p.DstPort == 4789
			}, 1, 5*time.Second)
			if len(got) == 0 {
				t.Errorf("UDP %s → %s:4789 not seen on %s of node %s; it saw %+v", src.IP, dst.IP, dst.UnderlayIf, dst.Name, sniffer.Packets())
			}
		}
		sniffer.Close()
	}
	api := b.Env["NETCLASS_TESTBED_APISERVER"]
	for _, n := range nodes {
		out, err := n.Output(ctx, "curl", "-sk", "--max-time", "5", api+"/readyz")
		if err != nil || out != "ok" {
			t.Errorf("node %s: %s/readyz answered %q (%v)", n.Name, api, out, err)
		}
		if n.Primary() {
			continue // this machine's own routes are not the test bed's
		}
		routes, err := n.Output(ctx, "ip", "route", "show", "default")
		if err != nil || strings.TrimSpace(routes) != "" {
			t.Errorf("node %s: default route %q (%v), want none", n.Name, routes, err)
		}
	}
}

// A node joins the running test bed (node.sh add), runs a pod, and leaves (node.sh remove):
// its Node object, its namespaces, its underlay link and its place in the node list go.
func TestNodeJoinsAndLeaves(t *testing.T) {
	c := testbed.Client(t)
	before := testbed.Nodes(t, c)
	ctx := testbed.Context(t, 5*time.Minute)
	suffix := make([]byte, 3)
	rand.Read(suffix)
	name := "smoke-" + hex.EncodeToString(suffix)
	t.Cleanup(func() {
		if err := bed.RemoveNode(context.Background(), name); err != nil {
			t.Errorf("remove node %s: %v", name, err)
		}
	})
	n, err := bed.AddNode(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if n.Primary() || !n.Exists() {
		t.Fatalf("node %s: want namespaces of its own, got %+v", name, n)
	}
	for _, o := range before {
		if o.Index == n.Index || o.IP == n.IP || o.UnderlayIf == n.UnderlayIf || o.PodSubnet == n.PodSubnet {
			t.Errorf("node %s shares its index, address, underlay or pod subnet with %s: %+v, %+v", name, o.Name, n, o)
		}
	}
	after := testbed.Nodes(t, c)
	if len(after) != len(before)+1 || after[len(after)-1].Name != name {
		t.Fatalf("nodes after the join: %v", names(after))
	}

	ns := testbed.Namespace(t, c)
	pod := testbed.OnNode(testbed.Pod(ns, "joined", "sleep", "3600"), name)
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testbed.WaitForPodRunning(t, c, ns, "joined", time.Minute)
	if out, _, err := testbed.Exec(ctx, testbed.RestConfig(t), ns, "joined", "main", "echo", "joined"); err != nil || out != "joined\n" {
		t.Fatalf("exec in the pod on node %s: %q %v", name, out, err)
	}

	if err := bed.RemoveNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s after the leave: %v, want not found", name, err)
	}
	if got := names(testbed.Nodes(t, c)); !slices.Equal(got, names(before)) {
		t.Errorf("nodes after the leave: %v, want %v", got, names(before))
	}
	if n.Exists() {
		t.Errorf("node %s's namespaces %s, %s are still there", name, n.NetNS, n.MntNS)
	}
	envFile := filepath.Join(testbed.Bed(t).StateDir, "nodes", name+".env")
	for _, p := range []string{n.NetNS, n.MntNS, n.HostPath(n.KubeletDir), envFile} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s of node %s is still there (%v)", p, name, err)
		}
	}
	if _, err := net.InterfaceByName(fmt.Sprintf("nctb-n%d", n.Index)); err == nil {
		t.Errorf("the underlay link of node %s is still there", name)
	}
}

func names(nodes []bed.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}
