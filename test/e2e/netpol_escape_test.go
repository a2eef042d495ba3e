//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/rawframe"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// A pod with the default capabilities (CAP_NET_RAW, not CAP_NET_ADMIN)
// builds Ethernet frames itself with test/testbed/netprobe, as any process
// of an ordinary pod can. On every attachment type netclass enforces at the
// switch port (netclass-vxlan across two nodes, netclass-bridge on one) it
// cannot send past its egress policy (IP or not), nor pass for the one
// neighbour a server's policy admits (by address or by MAC and address),
// nor send router advertisements; what it sends as itself, where no policy
// stops it, arrives (so the probes and captures work).
func TestDefaultPodCannotEscapeItsPolicy(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	subnet := harness.RandomSubnet()
	for _, tc := range []struct {
		name   string
		params map[string]any
		friend bed.Node // the server's node is n1, the intruder's too
	}{
		{"netclass-vxlan across two nodes", map[string]any{"type": "netclass-vxlan", "vni": harness.RandomVNI(),
			"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": subnet}}}}}, n2},
		{"netclass-bridge", harness.BridgeParams("e2e"+harness.Unique(6), harness.RandomSubnet()), n1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newEscapeBed(t, e, tc.params, map[string]bed.Node{"server": n1, "friend": tc.friend, "intruder": n1})
			b.escapes(t, e)
		})
	}
}

// escapeBed is one namespace on one network with three pods: a server, its
// friend (the one peer its policy admits) and an intruder.
type escapeBed struct {
	ns   string
	pods map[string]*escapePod
}

type escapePod struct {
	name  string
	netns string
	addr  netip.Addr
	mac   string
	l     *harness.Listeners
}

func newEscapeBed(t *testing.T, e *harness.Env, params map[string]any, nodes map[string]bed.Node) *escapeBed {
	t.Helper()
	class := e.Class(t, harness.PodNetworkKind)
	network := "e2e-esc-" + harness.Unique(6)
	var links []string
	if br, ok := params["bridge"].(string); ok {
		links = append(links, br)
	}
	e.PodNetwork(t, network, params, nil, links...)
	b := &escapeBed{ns: testbed.Namespace(t, e.Kube), pods: map[string]*escapePod{}}
	for _, n := range []bed.Node{nodes["server"], nodes["friend"]} {
		e.WaitDeviceOn(t, n.Name, class, "", network, true)
	}
	e.ClaimTemplate(t, b.ns, "net", class, "", network, nil)
	var pods []*corev1.Pod
	for name, n := range nodes {
		p := harness.PodOn(n.Name, b.ns, name, "net")
		p.Labels = map[string]string{"app": name}
		pods = append(pods, p)
	}
	e.RunPods(t, pods...)
	for name, n := range nodes {
		ifc := e.MustIface(t, b.ns, name, "net1")
		pp := &escapePod{name: name, mac: ifc.MAC, netns: e.PodNetNS(t, n, getPod(t, e, b.ns, name).UID, "net1")}
		pp.addr = netip.MustParsePrefix(ifc.CIDRs[0]).Addr()
		pp.l = harness.Listen(t, pp.netns, []int{80}, []int{53})
		b.pods[name] = pp
	}
	return b
}

func (b *escapeBed) escapes(t *testing.T, e *harness.Env) {
	server, friend, intruder := b.pods["server"], b.pods["friend"], b.pods["intruder"]
	b.requireDefaultCapabilities(t, e, "intruder")
	raw := func(from *escapePod, to *escapePod, mac, addr string) []string {
		args := []string{"udp", "net1", to.mac, netip.AddrPortFrom(to.addr, 53).String(), ""}
		if mac != "" {
			args = append(args, mac, addr)
		}
		return append([]string{"netprobe"}, args...)
	}
	// no policy: a hand-built frame as itself arrives
	if !b.arrives(t, e, "intruder", server, raw(intruder, server, "", "")) {
		t.Fatal("without a policy the intruder's own frame did not arrive: the test proves nothing")
	}
	// an egress policy denying everything: nothing it builds gets out
	denyOut := np(b.ns, "deny-out", map[string]string{"app": "intruder"}, func(p *networkingv1.NetworkPolicy) {
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	})
	b.setPolicies(t, e, []*networkingv1.NetworkPolicy{denyOut}, func() bool { return !b.open(t, intruder, server, corev1.ProtocolTCP, 80) })
	if b.arrives(t, e, "intruder", server, raw(intruder, server, "", "")) {
		t.Error("a hand-built UDP frame escaped the intruder's egress policy")
	}
	if b.arrives(t, e, "intruder", server, []string{"netprobe", "raw", "net1", server.mac, ""}) {
		t.Error("a non-IP frame escaped the intruder's egress policy")
	}
	// the server admits its friend only: the intruder cannot pass for it
	onlyFriend := np(b.ns, "only-friend", map[string]string{"app": "server"},
		fromOn(peer(nil, sel("app", "friend")), port(corev1.ProtocolUDP, intstr.FromInt32(53), nil)))
	b.setPolicies(t, e, []*networkingv1.NetworkPolicy{onlyFriend}, func() bool {
		return b.open(t, friend, server, corev1.ProtocolUDP, 53) && !b.open(t, intruder, server, corev1.ProtocolUDP, 53)
	})
	if !b.arrives(t, e, "friend", server, raw(friend, server, "", "")) {
		t.Error("the friend's own frame did not arrive: the test proves nothing")
	}
	if b.arrives(t, e, "intruder", server, raw(intruder, server, intruder.mac, friend.addr.String())) {
		t.Error("the intruder passed its frame off as the friend's by its address")
	}
	if b.arrives(t, e, "intruder", server, raw(intruder, server, friend.mac, friend.addr.String())) {
		t.Error("the intruder passed its frame off as the friend's by its MAC and address")
	}
	if b.arrives(t, e, "intruder", server, []string{"netprobe", "ra", "net1"}) {
		t.Error("the intruder's router advertisement reached the server")
	}
}

// requireDefaultCapabilities checks that the pod's container has
// CAP_NET_RAW and not CAP_NET_ADMIN, as containerd gives by default.
func (b *escapeBed) requireDefaultCapabilities(t *testing.T, e *harness.Env, pod string) {
	t.Helper()
	out, stderr, err := testbed.Exec(testbed.Context(t, time.Minute), e.Rest, b.ns, pod, "main", "grep", "CapEff", "/proc/self/status")
	if err != nil {
		t.Fatalf("capabilities of %s: %v: %s", pod, err, stderr)
	}
	f := strings.Fields(out)
	caps, err := strconv.ParseUint(f[len(f)-1], 16, 64)
	if err != nil {
		t.Fatalf("capabilities of %s: %q", pod, out)
	}
	const netAdmin, netRaw = 12, 13
	if caps&(1<<netRaw) == 0 || caps&(1<<netAdmin) != 0 {
		t.Fatalf("pod %s runs with capabilities %#x: want CAP_NET_RAW without CAP_NET_ADMIN", pod, caps)
	}
}

// arrives runs the command in the pod's container with a marker as its
// payload (the empty argument after the destination is replaced) and
// reports whether to's net1 received a frame carrying it.
func (b *escapeBed) arrives(t *testing.T, e *harness.Env, pod string, to *escapePod, cmd []string) bool {
	t.Helper()
	marker := "netclass-" + harness.Unique(10)
	for i, a := range cmd {
		if a == "" {
			cmd[i] = marker
		}
	}
	var capture *rawframe.Capture
	if err := ns.WithNetNSPath(to.netns, func(ns.NetNS) (err error) { capture, err = rawframe.Listen("net1"); return err }); err != nil {
		t.Fatal(err)
	}
	defer capture.Close()
	if _, stderr, err := testbed.Exec(testbed.Context(t, time.Minute), e.Rest, b.ns, pod, "main", cmd...); err != nil {
		t.Fatalf("%s in %s: %v: %s", strings.Join(cmd, " "), pod, err, stderr)
	}
	want := []byte(marker)
	if cmd[1] == "ra" {
		want = []byte{64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0} // netprobe's advertisement: hop limit, flags, lifetime, timers
	}
	got, err := capture.Wait(want, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// open probes from one pod to another's address over net1.
func (b *escapeBed) open(t *testing.T, from, to *escapePod, proto corev1.Protocol, port int) bool {
	t.Helper()
	ok, err := harness.Probe(from.netns, proto, to.addr, port, to.l)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// setPolicies makes the namespace's policies the given ones, and waits
// until inEffect.
func (b *escapeBed) setPolicies(t *testing.T, e *harness.Env, pols []*networkingv1.NetworkPolicy, inEffect func() bool) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	client := e.Kube.NetworkingV1().NetworkPolicies(b.ns)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if err := client.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pols {
		if _, err := client.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, fmt.Sprintf("policies %v in effect", names(pols)),
		func(context.Context) (bool, string, error) { return inEffect(), "", nil })
}

func names(pols []*networkingv1.NetworkPolicy) []string {
	var out []string
	for _, p := range pols {
		out = append(out, p.Name)
	}
	return out
}
