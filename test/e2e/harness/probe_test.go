package harness

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	corev1 "k8s.io/api/core/v1"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/nstest"
)

// The truth table's probes see what the kernel lets through: every
// protocol's probe is open between two namespaces, and closed once the
// server's interface is isolated but for TCP 80, and the client's too.
func TestProbesSeeWhatPasses(t *testing.T) {
	client, server := nstest.New(t), nstest.New(t)
	nstest.Veth(t, client, "net1", "10.99.0.1/24", server, "net1", "10.99.0.2/24")
	l := Listen(t, server.Path, []int{80, 8080}, []int{53})
	addr := netip.MustParseAddr("10.99.0.2")
	probes := []struct {
		proto corev1.Protocol
		port  int
		// isolated: the verdict once only TCP 80 may come in
		isolated bool
	}{{corev1.ProtocolTCP, 80, true}, {corev1.ProtocolTCP, 8080, false}, {corev1.ProtocolUDP, 53, false}, {corev1.ProtocolSCTP, 7777, false}}
	check := func(stage string, isolated bool) {
		t.Helper()
		for _, p := range probes {
			want := !isolated || p.isolated
			if open, err := Probe(client.Path, p.proto, addr, p.port, l); err != nil || open != want {
				t.Errorf("%s: %s/%d open=%v (%v), want %v", stage, p.proto, p.port, open, err, want)
			}
		}
	}
	// the new link's first SYN may go before it carries (a busy machine):
	// wait until the path answers, then check
	deadline := time.Now().Add(10 * time.Second)
	for open, err := Probe(client.Path, corev1.ProtocolTCP, addr, 80, l); !open; open, err = Probe(client.Path, corev1.ProtocolTCP, addr, 80, l) {
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the path between the namespaces never answered (%v)", err)
		}
	}
	check("open", false)
	plan := &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{Ports: []netpol.PortRange{{Proto: 6, From: 80, To: 80}}}}}}
	isolate(t, server, plan)
	check("isolated", true)
	// the client's own output hook drops what is not TCP 80: its sends fail
	// (EPERM), which is closed too
	egress := &netpol.Plan{Egress: plan.Ingress}
	isolate(t, client, egress)
	check("isolated both ways", true)
}

// A lost SYN does not close a TCP probe (the kernel would send it again
// only after ProbeTimeout): with every other SYN to port 80 dropped, each
// of six probes loses its first and connects with its next.
func TestTCPProbeOutlivesALostSYN(t *testing.T) {
	client, server := nstest.New(t), nstest.New(t)
	nstest.Veth(t, client, "net1", "10.99.0.1/24", server, "net1", "10.99.0.2/24")
	l := Listen(t, server.Path, []int{80}, nil)
	addr := netip.MustParseAddr("10.99.0.2")
	deadline := time.Now().Add(10 * time.Second) // the new link may not carry yet
	for open, err := Probe(client.Path, corev1.ProtocolTCP, addr, 80, l); !open; open, err = Probe(client.Path, corev1.ProtocolTCP, addr, 80, l) {
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the path between the namespaces never answered (%v)", err)
		}
	}
	server.Output(t, "nft", "add table inet lossy; add chain inet lossy in { type filter hook input priority 0; };"+
		" add rule inet lossy in tcp dport 80 tcp flags syn numgen inc mod 2 == 0 counter drop")
	const probes = 6
	for i := range probes {
		if open, err := Probe(client.Path, corev1.ProtocolTCP, addr, 80, l); err != nil || !open {
			t.Fatalf("probe %d: open=%v (%v), want open", i, open, err)
		}
	}
	if got, want := server.Output(t, "nft", "list", "chain", "inet", "lossy", "in"), fmt.Sprintf("counter packets %d ", probes); !strings.Contains(got, want) {
		t.Fatalf("the chain dropped other than one SYN of each probe (want %q):\n%s", want, got)
	}
}

// isolate gives the namespace's net1 the policy plan.
func isolate(t *testing.T, n *nstest.NS, plan *netpol.Plan) {
	t.Helper()
	err := nft.InNamespace(n.Path, func(c *nftables.Conn) error {
		_, err := nft.SyncPolicy(c, "net1", plan)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each UDP probe to a pod is a new flow: its source port does not repeat
// before the listeners' whole range went round, and stays out of the
// kernel's ephemeral range.
func TestUDPSourcePortsDoNotRepeat(t *testing.T) {
	for _, start := range []uint32{0, udpSourceCount - 1, 1<<32 - 3} {
		l := &Listeners{}
		l.udpSources.Store(start)
		seen := map[int]bool{}
		for range udpSourceCount {
			p := l.udpSourcePort()
			if p < udpSourceFirst || p >= udpSourceFirst+udpSourceCount || p >= 32768 {
				t.Fatalf("start %d: source port %d, want in [%d, %d) and below 32768", start, p, udpSourceFirst, udpSourceFirst+udpSourceCount)
			}
			if seen[p] {
				t.Fatalf("start %d: source port %d again after %d probes, want none before %d", start, p, len(seen), udpSourceCount)
			}
			seen[p] = true
		}
	}
}
