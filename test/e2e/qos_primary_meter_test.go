//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// primaryNS finds the network namespace of a pod of the node by its eth0
// address, among the runtime's namespace files (the pod has no netclass
// attachment whose record would name it).
func primaryNS(t *testing.T, n bed.Node, name, ip string) *nstest.NS {
	t.Helper()
	// containerd's netns_mounts_under_state_dir: under its CRI plugin's state
	dir := n.HostPath(bed.StateDir() + "/containerd/io.containerd.grpc.v1.cri/netns")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := netip.MustParseAddr(ip)
	for _, f := range files {
		path := filepath.Join(dir, f.Name())
		var found bool
		_ = netns.Do(path, func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			addrs, err := ifi.Addrs()
			for _, a := range addrs {
				if p, perr := netip.ParsePrefix(a.String()); perr == nil && p.Addr() == want {
					found = true
				}
			}
			return err
		})
		if found {
			return &nstest.NS{Name: name, Path: path}
		}
	}
	t.Fatalf("no network namespace in %s has %s on eth0", dir, ip)
	return nil
}

// A metered rule of a NetworkQoS on the default network holds the pod's
// UDP flow on eth0 to its rate (±20%) at three times the rate offered,
// and the sender never gets an error (the excess is dropped at the host
// end, not at the pod's socket). Node 1, whose pods' namespaces this
// machine reaches.
func TestPrimaryNetworkQoSMeter(t *testing.T) {
	e := harness.Shared(t)
	n1 := e.Nodes[0]
	ns := testbed.Namespace(t, e.Kube)
	e.RunPods(t, primaryPod(n1, ns, "src", map[string]string{"app": "src"}), primaryPod(n1, ns, "dst", nil))
	srcIP, dstIP := getPod(t, e, ns, "src").Status.PodIP, getPod(t, e, ns, "dst").Status.PodIP
	kbps := traffic.Rate(4000)
	obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "meter"},
		Spec: ncv1.NetworkQoSSpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "src"}},
			Egress: []ncv1.Rule{{DSCP: 10, Bandwidth: &ncv1.Bandwidth{Rate: ptr.To(kbps), Burst: ptr.To(kbps / 10)},
				Classifier: &ncv1.Classifier{Ports: []ncv1.Port{{Protocol: ncv1.ProtocolUDP, Port: ptr.To(int32(6000))}}}}}}}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, e, ns, "meter", map[string]int32{n1.Name: 1}, "enforced on 1 attachments on 1 nodes")
	client, server := primaryNS(t, n1, "src", srcIP), primaryNS(t, n1, "dst", dstIP)
	want := float64(kbps) * 1000
	var last float64
	testbed.Poll(t, testbed.Context(t, 2*liveTimeout), time.Millisecond, fmt.Sprintf("the UDP flow on eth0 metered at %d kbps", kbps),
		func(context.Context) (bool, string, error) {
			got, err := traffic.UDPRate(client, server, netip.MustParseAddr(dstIP), 6000, 1200, 3*want, 3*time.Second, time.Second)
			if err != nil {
				return false, "", fmt.Errorf("the sender got an error: %w", err)
			}
			last = got.SteadyBps
			return math.Abs(got.SteadyBps-want) <= 0.2*want, fmt.Sprintf("%.2f Mbit/s", got.SteadyBps/1e6), nil
		})
	t.Logf("rule rate %d kbps, offered %.2f Mbit/s: the flow gets %.2f Mbit/s", kbps, 3*want/1e6, last/1e6)
}
