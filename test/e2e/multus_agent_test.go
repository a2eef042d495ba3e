//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mnpclient "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// dualPod is a pod with a Multus attachment (net1: Multus names it first)
// and a claim attachment (net2: netclass-dra names it around Multus's).
type dualPod struct {
	name       string
	netns      string // its network namespace, open on this machine
	claim, nad netip.Addr
	claimHost  string // the host end of the claim's net2
	sandbox    string // the pod's sandbox (its claim attachment's record key)
	rec        *attach.Record
	l          *harness.Listeners
}

// TestMultusAndClaimAttachmentsOfOnePod: two pods on node 1, each with a
// Multus attachment (a hand-written netclass-bridge NAD, no interface name
// asked: Multus makes it net1 at sandbox creation) and a claim attachment
// (a netclass-bridge PodNetwork: netclass-dra names it net2, around
// Multus's). netclass-dra's agent covers the Multus one: a
// MultiNetworkPolicy whose policy-for names the NAD closes net1 but for
// its peer (resolved through network-status); a labelled NetworkPolicy
// closes both; none opens both again (probes from the client to the
// server over each). Deleting the pods leaves no host end, no port rule,
// no address and no record of either path.
func TestMultusAndClaimAttachmentsOfOnePod(t *testing.T) {
	e := harness.Shared(t)
	startMultus(t)
	n := e.Nodes[0]
	id := harness.Unique(5)
	network, bridge, ipamDir := "e2e-multus-"+id, "ncmt"+id, "/var/lib/cni/netclass-e2e-multus-"+id
	t.Cleanup(func() { removeNADState(t, n, bridge, network, ipamDir) })
	bn := e.BridgeNet(t, "e2e-dual", "net")
	ns := bn.Namespace
	createNAD(t, e, ns, "ncbr", map[string]any{
		"cniVersion": "1.0.0", "name": network, "type": "netclass-bridge", "bridge": bridge,
		"ipam": map[string]any{"type": "host-local", "dataDir": ipamDir, "ranges": []any{[]any{map[string]any{"subnet": "10.78.0.0/24"}}}},
	})
	var specs []*corev1.Pod
	for _, name := range []string{"server", "client"} {
		p := harness.PodOn(n.Name, ns, name, "net")
		p.Labels = map[string]string{"app": name}
		p.Annotations = map[string]string{annotationNetworks: "ncbr"}
		specs = append(specs, p)
	}
	e.RunPods(t, specs...)
	server, client := dual(t, e, n, ns, network, bn.PodNetwork, "server"), dual(t, e, n, ns, network, bn.PodNetwork, "client")
	server.l = harness.Listen(t, server.netns, []int{80, 8080}, nil)
	dualRows(t, e, ns, client, server)
	for _, name := range []string{"server", "client"} {
		deletePodAndWait(t, e, ns, name)
	}
	checkNADGone(t, n, network, ipamDir, map[string]*attach.Record{"server": server.rec, "client": client.rec})
	checkClaimGone(t, n, bn.PodNetwork, server, client)
}

// dual reads the pod's two attachments.
func dual(t *testing.T, e *harness.Env, n bed.Node, ns, network, claimNet, name string) *dualPod {
	t.Helper()
	pod := getPod(t, e, ns, name)
	st := statusOf(t, pod, "net1")
	if st.Name != ns+"/ncbr" || len(st.IPs) != 1 {
		t.Fatalf("pod %s: network-status entry for net1 %+v, want %s/ncbr with one address", name, st, ns)
	}
	ifc := e.MustIface(t, ns, name, "net1")
	if len(ifc.CIDRs) != 1 || !strings.HasPrefix(ifc.CIDRs[0], st.IPs[0]+"/") {
		t.Fatalf("pod %s: net1 has %v, network-status says %v", name, ifc.CIDRs, st.IPs)
	}
	d := &dualPod{name: name, nad: netip.MustParseAddr(st.IPs[0]), rec: nadRecord(t, n, network, "net1", ifc.CIDRs[0]),
		claim: netip.MustParseAddr(harness.Addr(t, e.Attached(t, ns, name, "net", "net2")))}
	d.netns = e.PodNetNS(t, n, pod.UID, "net2")
	d.sandbox = e.AttachmentOn(t, n, pod.UID, "net2").SandboxID
	if r, err := (attach.Store{Dir: n.HostPath(render.StateDir)}).Get(claimNet, d.sandbox, "net2"); err != nil || r == nil {
		t.Fatalf("pod %s: no record of its claim attachment in %s/%s (%v)", name, render.StateDir, claimNet, err)
	}
	if _, err := os.Stat(filepath.Join(n.HostPath(render.IPAMStateDir), claimNet, d.claim.String())); err != nil {
		t.Fatalf("pod %s: host-local's reservation of its claim address: %v", name, err)
	}
	host, err := qosport.HostEnd(d.rec.NetNS, "net2")
	if err != nil || host == "" || host == d.rec.HostIf {
		t.Fatalf("pod %s: host end of the claim's net2 %q (%v), Multus's net1's %q: want two", name, host, err, d.rec.HostIf)
	}
	d.claimHost = host
	t.Logf("pod %s: net1 %s (Multus, host end %s), net2 %s (claim, host end %s)", name, d.nad, d.rec.HostIf, d.claim, host)
	return d
}

// dualRows writes each row's policies and waits until the probes from the
// client to the server over Multus's net1 (TCP 80, 8080) and the claim's
// net2 (TCP 80) give
// its verdicts.
func dualRows(t *testing.T, e *harness.Env, ns string, client, server *dualPod) {
	t.Helper()
	mc, err := mnpclient.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	b := &polBed{written: map[string]bool{}, network: "ncbr"} // applyMulti: policy-for ncbr, the NAD of the namespace
	multiWritten := map[string]bool{}
	rows := nadRows(ns, "ncbr")
	for _, row := range rows {
		b.apply(t, e, row.np)
		b.applyMulti(t, mc, multiWritten, row.multi)
		probes := []struct {
			addr netip.Addr
			port int
		}{{server.nad, 80}, {server.nad, 8080}, {server.claim, 80}}
		want := [3]bool{row.open[0], row.open[1], len(row.np) == 0} // only the labelled policy is on the claim's net2
		testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, row.name, func(context.Context) (bool, string, error) {
			var got [3]bool
			var note []string
			for i, p := range probes {
				got[i], err = harness.Probe(client.netns, corev1.ProtocolTCP, p.addr, p.port, server.l)
				if err != nil {
					return false, "", err
				}
				note = append(note, fmt.Sprintf("%s:%d open=%v want %v", p.addr, p.port, got[i], want[i]))
			}
			return got == want, strings.Join(note, ", "), nil
		})
		t.Logf("%s: Multus net1 TCP 80 open=%v, TCP 8080 open=%v; claim net2 TCP 80 open=%v", row.name, want[0], want[1], want[2])
	}
}

// checkClaimGone: the claim attachments' host ends, port rules, plugin
// records and address reservations are gone, and so are the Multus ones'
// port rules.
func checkClaimGone(t *testing.T, n bed.Node, network string, pods ...*dualPod) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	rules, _ := n.Output(ctx, "nft", "list", "table", "bridge", "netclass_qos") // absent: no rule at all
	guard, _ := n.Output(ctx, "nft", "list", "table", "bridge", "netclass_guard")
	for _, p := range pods {
		if out, err := n.Output(ctx, "ip", "-o", "link", "show", "dev", p.claimHost); err == nil {
			t.Errorf("pod %s deleted, its claim attachment's host end is still there: %s", p.name, out)
		}
		if r, err := (attach.Store{Dir: n.HostPath(render.StateDir)}).Get(network, p.sandbox, "net2"); err != nil || r != nil {
			t.Errorf("pod %s deleted, its claim attachment's record is still there: %+v (%v)", p.name, r, err)
		}
		if _, err := os.Stat(filepath.Join(n.HostPath(render.IPAMStateDir), network, p.claim.String())); !os.IsNotExist(err) {
			t.Errorf("pod %s deleted, host-local still reserves its claim address %s (%v)", p.name, p.claim, err)
		}
		for _, h := range []string{p.claimHost, p.rec.HostIf} {
			if strings.Contains(rules, h) || strings.Contains(guard, h) {
				t.Errorf("pod %s deleted, rules of its host end %s are still there:\n%s\n%s", p.name, h, rules, guard)
			}
		}
	}
}

// nadRow is one row of policies on a NAD's attachments and what it leaves
// open of the server's interface on the NAD: TCP 80, TCP 8080.
type nadRow struct {
	name  string
	np    []*networkingv1.NetworkPolicy // labelled NetworkPolicies
	multi []*networkingv1.NetworkPolicy // as MultiNetworkPolicies policy-for the NAD
	open  [2]bool
}

// nadRows: no policy; a MultiNetworkPolicy policy-for the NAD admitting
// TCP 8080 from app=client only (the client's address from its
// network-status); a labelled NetworkPolicy denying app=server's ingress;
// no policy again.
func nadRows(ns, nadName string) []nadRow {
	only8080 := np(ns, "nad-8080", map[string]string{"app": "server"}, ingressOnly,
		fromOn(peer(nil, sel("app", "client")), port(corev1.ProtocolTCP, intstr.FromInt32(8080), nil)))
	deny := np(ns, "deny", map[string]string{"app": "server"}, ingressOnly)
	return []nadRow{
		{"no policy", nil, nil, [2]bool{true, true}},
		{"MultiNetworkPolicy policy-for " + nadName + ": TCP 8080 from app=client only", nil, pols(only8080), [2]bool{false, true}},
		{"labelled NetworkPolicy deny ingress", pols(deny), nil, [2]bool{false, false}},
		{"no policy again", nil, nil, [2]bool{true, true}},
	}
}
