//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	mnpclient "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/controller/nad"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// genPod is a pod's attachment through a generated NAD (net1, made by
// Multus running netclass-nad).
type genPod struct {
	name  string
	addr  netip.Addr
	netns string // its network namespace, open from this machine
}

// TestGeneratedNADUnderSeedQoSAndPolicies: a VXLAN Network labelled
// name=ovn-storage gets its generated NAD (labelled as the Network); a
// server pod on node 1 and a client pod on node 2 ask for it through
// k8s.v1.cni.cncf.io/networks. Seed 003's NetworkQoS example with its
// NetworkAttachmentDefinitions selection, applied unchanged but for its
// namespace, marks the client's TCP 80 and 443 with DSCP 11, as the
// fabric sees it (the outer header of the VXLAN datagrams on node 1's
// underlay, and the packet inside) and nothing else; the status counts
// both pods; the Network losing its label (the NAD follows) unmarks, and
// the label back marks again. A MultiNetworkPolicy whose policy-for names
// the generated NAD and a labelled NetworkPolicy are enforced on net1
// (probes from the client to the server across the nodes).
func TestGeneratedNADUnderSeedQoSAndPolicies(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	genRenderHere(t, e)
	genMultus(t)
	ns := testbed.Namespace(t, e.Kube)
	genStorageNetwork(t, e, ns, n1, n2)
	var specs []*corev1.Pod
	for _, p := range []struct{ name, node string }{{"server", n1.Name}, {"client", n2.Name}} {
		pod := testbed.OnNode(testbed.Pod(ns, p.name, "sleep", "3600"), p.node)
		pod.Labels = map[string]string{"app": p.name}
		pod.Annotations = map[string]string{nad.AnnotationNetworks: "storage"}
		specs = append(specs, pod)
	}
	e.RunPods(t, specs...)
	server, client := genAttached(t, e, n1, ns, "server"), genAttached(t, e, n2, ns, "client")
	genSeedQoS(t, e, ns, n1, n2, server, client)
	genPolicyRows(t, e, ns, server, client)
	genFromTheFirstPacket(t, e, n1, ns, server)
}

// genFromTheFirstPacket: a pod attached through the generated NAD is under
// its policy from its first packet, as a claim's is: the rendered list
// starts the port closed (netclass-bridge closes it in its ADD) and the
// agent opens it once the policy is in place. nft monitor, from before the
// pod, must show the port's host end added to the guard's closed set and
// later deleted from it; without the closed start it is never in the set,
// and the port passes everything until the agent's first sync of the
// attachment (its network-status read, after the ADD). The pod's container
// connects to the server over net1 as the first thing it does: closed (an
// egress-deny policy was there before the pod); and open once the policy
// is gone. genPolicyRows's listeners on the server answer until the test
// ends. The pod is on node 1, whose network namespace is the test's.
func genFromTheFirstPacket(t *testing.T, e *harness.Env, n bed.Node, ns string, server *genPod) {
	t.Helper()
	if !n.Primary() {
		t.Fatalf("node %s is not in the test's network namespace: nft monitor would not see its guard", n.Name)
	}
	b := &polBed{written: map[string]bool{}, network: "storage"}
	b.apply(t, e, pols(np(ns, "late-deny", map[string]string{"app": "late"}, egressOnly)))
	mon := startNFTMonitor(t)
	late := testbed.OnNode(testbed.Pod(ns, "late", firstConnectionCommand(server.addr.String())...), n.Name)
	late.Labels = map[string]string{"app": "late"}
	late.Annotations = map[string]string{nad.AnnotationNetworks: "storage"}
	e.RunPods(t, late)
	first := firstConnection(t, e, ns, "late")
	if first != "closed" {
		t.Errorf("the first connection over a generated NAD of a pod whose egress a policy denies was %s", first)
	}
	b.apply(t, e, nil)
	waitConnects(t, e, ns, "late", server.addr.String())
	rec := genRecord(t, n, ns, e.MustIface(t, ns, "late", "net1").CIDRs[0])
	after, ok := guardOpenedAfter(mon.stop(), rec.HostIf)
	if !ok {
		t.Fatalf("port %s of the late pod: nft monitor did not see it closed at its ADD and opened by the agent later", rec.HostIf)
	}
	t.Logf("a pod attached through the generated NAD: port %s closed at its ADD, opened by the agent %v later; under an egress-deny policy its first connection %s; open once the policy went",
		rec.HostIf, after.Round(time.Millisecond), first)
}

// genStorageNetwork makes the VXLAN Network "storage" labelled
// name=ovn-storage (the label the seed's example selects NADs by) and
// waits for its lists on both nodes and its NAD, labelled the same.
func genStorageNetwork(t *testing.T, e *harness.Env, ns string, n1, n2 bed.Node) {
	t.Helper()
	class := e.Class(t, harness.NetworkKind)
	e.Network(t, ns, "storage", autoVXLANCluster(t, e), harness.RandomVNI(), harness.RandomSubnet())
	genLabelNetwork(t, e, ns, "storage", "ovn-storage")
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, class, ns, "storage", true)
		genWaitFile(t, n, nadfile.Ref{Namespace: ns, Name: "storage"})
	}
	genWaitNADLabel(t, e, ns, "storage", "ovn-storage")
}

// genLabelNetwork sets the Network's label name to value ("" removes it).
func genLabelNetwork(t *testing.T, e *harness.Env, ns, name, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"name":%s}}}`, v)
	if _, err := e.NC.NetclassV1alpha1().Networks(ns).Patch(testbed.Context(t, time.Minute), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label Network %s/%s name=%q: %v", ns, name, value, err)
	}
}

// genWaitNADLabel waits until the Network's generated NAD has label name
// = value ("" for none).
func genWaitNADLabel(t *testing.T, e *harness.Env, ns, name, value string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, fmt.Sprintf("NAD %s/%s labelled name=%q", ns, name, value),
		func(ctx context.Context) (bool, string, error) {
			u, err := genGetNAD(ctx, dyn, ns, name)
			if apierrors.IsNotFound(err) {
				return false, "not yet", nil
			}
			if err != nil {
				return false, "", err
			}
			return nad.Owned(u) && u.GetLabels()["name"] == value, fmt.Sprint(u.GetLabels()), nil
		})
}

// genAttached reads the pod's net1: network-status and the interface
// agree, and the netclass plugin's record gives its namespace.
func genAttached(t *testing.T, e *harness.Env, n bed.Node, ns, name string) *genPod {
	t.Helper()
	st := statusOf(t, getPod(t, e, ns, name), "net1")
	ifc := e.MustIface(t, ns, name, "net1")
	if st.Name != ns+"/storage" || len(st.IPs) != 1 || len(ifc.CIDRs) != 1 || !strings.HasPrefix(ifc.CIDRs[0], st.IPs[0]+"/") {
		t.Fatalf("pod %s: network-status entry %+v, net1 has %v", name, st, ifc.CIDRs)
	}
	rec := genRecord(t, n, ns, ifc.CIDRs[0])
	p := &genPod{name: name, addr: netip.MustParseAddr(st.IPs[0]), netns: netnsOn(e, n, rec.NetNS)}
	t.Logf("pod %s on %s: net1 %s (host end %s)", name, n.Name, ifc.CIDRs[0], rec.HostIf)
	return p
}

// genRecord finds the plugin's record of a net1 with the address where
// the node's rendered list of ns/storage has the plugin keep it (its main
// plugin's dataDir and the list's name).
func genRecord(t *testing.T, n bed.Node, ns, cidr string) *attach.Record {
	t.Helper()
	ref := nadfile.Ref{Namespace: ns, Name: "storage"}
	b, err := os.ReadFile(n.HostPath(nadfile.Path(nadfile.DefaultStateDir, ref)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := nadfile.Parse(b, ref)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Name    string `json:"name"`
		Plugins []struct {
			DataDir string `json:"dataDir"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(f.ConfList, &list); err != nil || len(list.Plugins) == 0 || list.Plugins[0].DataDir == "" {
		t.Fatalf("rendered list of %s on %s: no main plugin's dataDir (%v): %s", ref, n.Name, err, f.ConfList)
	}
	dir := n.HostPath(list.Plugins[0].DataDir)
	recs, err := attach.Store{Dir: dir}.List(list.Name)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, r := range recs {
		if r.IfName == "net1" && slices.Contains(r.Addresses, cidr) {
			return r
		}
		seen = append(seen, fmt.Sprintf("%s %v", r.IfName, r.Addresses))
	}
	t.Fatalf("no record of net1 %s in %s/%s on %s; it holds %v", cidr, dir, list.Name, n.Name, seen)
	return nil
}

// genSeedQoS applies the seed's NAD-selection example and checks what
// the fabric sees of the client's packets to the server.
func genSeedQoS(t *testing.T, e *harness.Env, ns string, n1, n2 bed.Node, server, client *genPod) {
	t.Helper()
	obj := seedObjects(t, "seed003-networkqos-nad.yaml", ns)[0]
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the seed's NetworkQoS: %v", err)
	}
	// a capture per phase: an earlier phase's packets must not answer for a later one
	capture := func() underlayCapture {
		s, err := traffic.Sniff(&nstest.NS{Name: n1.Name, Path: "/proc/self/ns/net"}, n1.UnderlayIf)
		if err != nil {
			t.Fatalf("capture on %s: %v", n1.UnderlayIf, err)
		}
		t.Cleanup(s.Close)
		return underlayCapture{t: t, from: n2.IP, to: n1.IP, s: s}
	}
	src, dst := client.addr.String(), server.addr.String()
	syn := func(port uint16) func() { return func() { synTo(t, e, ns, "client", dst, port) } }
	u := capture()
	u.seen("the seed's example: TCP 80", src, tcpTo(80), 11, syn(80))
	u.seen("the seed's example: TCP 443", src, tcpTo(443), 11, syn(443))
	u.seen("the seed's example leaves TCP 22 alone", src, tcpTo(22), 0, syn(22))
	waitNodes(t, e, ns, obj.Name, map[string]int32{n1.Name: 1, n2.Name: 1}, "enforced on 2 attachments on 2 nodes")
	genLabelNetwork(t, e, ns, "storage", "")
	genWaitNADLabel(t, e, ns, "storage", "")
	capture().seen("the NAD no longer labelled name=ovn-storage", src, tcpTo(80), 0, syn(80))
	genLabelNetwork(t, e, ns, "storage", "ovn-storage")
	capture().seen("the NAD labelled again", src, tcpTo(80), 11, syn(80))
	t.Log("the seed's NAD-selection example: DSCP 11 inside and outside the tunnel for TCP 80 and 443, 0 for TCP 22; " +
		"1 attachment on each node in its status; unmarked once the NAD lost its label, marked again with it back")
}

// genPolicyRows writes each row's policies and waits until the probes
// from the client (node 2) to the server (node 1) over net1 give its
// verdicts.
func genPolicyRows(t *testing.T, e *harness.Env, ns string, server, client *genPod) {
	t.Helper()
	mc, err := mnpclient.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	l := harness.Listen(t, server.netns, []int{80, 8080}, nil)
	b := &polBed{written: map[string]bool{}, network: "storage"} // applyMulti: policy-for the generated NAD
	multiWritten := map[string]bool{}
	rows := nadRows(ns, "storage")
	for _, row := range rows {
		b.apply(t, e, row.np)
		b.applyMulti(t, mc, multiWritten, row.multi)
		testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, row.name, func(context.Context) (bool, string, error) {
			var got [2]bool
			for i, p := range []int{80, 8080} {
				if got[i], err = harness.Probe(client.netns, corev1.ProtocolTCP, server.addr, p, l); err != nil {
					return false, "", err
				}
			}
			return got == row.open, fmt.Sprintf("TCP 80, 8080 open %v, want %v", got, row.open), nil
		})
		t.Logf("%s: net1 across the nodes TCP 80 open=%v, TCP 8080 open=%v", row.name, row.open[0], row.open[1])
	}
}
