package bridge

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// meteredPair attaches pod a with qos and pod b without to one bridge
// network (v4 and v6), and returns their results once a reaches b.
func meteredPair(t *testing.T, subnets []string, qosBlock map[string]any) (a, b *cnitest.Pod, ra, rb *current.Result) {
	t.Helper()
	h := cnitest.NewHost(t)
	marked := newNetwork(t, "blue", "blue0", subnets, map[string]any{"qos": qosBlock})
	plain := newNetwork(t, "blue", "blue0", subnets, nil)
	plain.conf["ipam"], plain.conf["dataDir"] = marked.conf["ipam"], marked.conf["dataDir"]
	a, b = cnitest.NewPod(t), cnitest.NewPod(t)
	ra = h.Add(t, plugin, marked.bytes(t), a, "net1")
	rb = h.Add(t, plugin, plain.bytes(t), b, "net1")
	for _, v6 := range []bool{false, true} {
		if err := traffic.Ping(a.NS, podIP(t, rb, v6), 5*time.Second); err != nil { // v6 DAD and neighbours settled
			t.Fatal(err)
		}
	}
	return a, b, ra, rb
}

func meterRule(proto string, port int, kbps float64) map[string]any {
	return map[string]any{"egress": []any{map[string]any{"priority": 1, "dscp": 10,
		"classifier": map[string]any{"ports": []any{map[string]any{"protocol": proto, "port": port}}},
		"bandwidth":  map[string]any{"rate": kbps, "burst": kbps / 10}}}}
}

// An application sending UDP at three times a metered rule's rate sees no
// error on its socket (a meter is a drop on the way, as behind a switch
// port), and the receiver gets the rule's rate, over IPv4 and IPv6.
func TestMeterIsTransparentToAUDPSender(t *testing.T) {
	meterKbps := float64(traffic.Rate(5000))
	a, b, _, rb := meteredPair(t, []string{"10.23.0.0/24", "fd23::/64"}, meterRule("UDP", 5201, meterKbps))
	for _, v6 := range []bool{false, true} {
		res, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: podIP(t, rb, v6), Port: 5201,
			UDPBps: 3 * meterKbps * 1000, Duration: 4 * time.Second, Omit: 2 * time.Second}.Run()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("v6=%v: sent %.2f Mbit/s, received %.2f Mbit/s (rule %.2f)", v6, res.SentBps/1e6, res.ReceivedBps/1e6, meterKbps/1e3)
		if res.Error != "" {
			t.Errorf("v6=%v: the sender got an error: %s", v6, res.Error)
			continue
		}
		if !within(res.ReceivedBps, meterKbps*1000, 0.15) {
			t.Errorf("v6=%v: received %.2f Mbit/s, rule rate %.2f", v6, res.ReceivedBps/1e6, meterKbps/1e3)
		}
	}
}

// A TCP stream through a metered rule loses what exceeds the rate on the
// way, as on a network (the sender retransmits, where a drop in its own
// stack would have been retried without a retransmission), and converges
// near the rate without the connection failing.
func TestTCPThroughAMeterConverges(t *testing.T) {
	meterKbps := float64(traffic.Rate(5000))
	a, b, _, rb := meteredPair(t, []string{"10.24.0.0/24", "fd24::/64"}, meterRule("TCP", 5202, meterKbps))
	res, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: podIP(t, rb, false), Port: 5202,
		Duration: 5 * time.Second, Omit: 2 * time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("received %.2f Mbit/s (rule %.2f), %d retransmissions", res.ReceivedBps/1e6, meterKbps/1e3, res.Retransmits)
	if res.Error != "" {
		t.Fatalf("the TCP stream failed: %s", res.Error)
	}
	if !within(res.ReceivedBps, meterKbps*1000, 0.2) {
		t.Errorf("received %.2f Mbit/s, rule rate %.2f", res.ReceivedBps/1e6, meterKbps/1e3)
	}
	if res.Retransmits == 0 {
		t.Error("no retransmission: the excess was not dropped on the way but in the sender's own stack")
	}
}

// wipe is what a process with CAP_NET_ADMIN in a namespace can do to the
// QoS it sees there: delete every nftables table and every qdisc.
const wipe = `nft flush ruleset
for dev in $(ls /sys/class/net); do
	for q in root ingress clsact; do tc qdisc del dev "$dev" "$q" 2>/dev/null || true; done
done
nft list ruleset; tc qdisc show | grep -v -e 'qdisc noqueue' -e 'qdisc noop' || true`

// A pod with CAP_NET_ADMIN that deletes every table and qdisc in its own
// namespace changes neither the DSCP its packets carry on the wire nor the
// rate its egress is shaped to: both live on the host end of its veth.
func TestPodWithNetAdminCannotUndoItsQoS(t *testing.T) {
	egress := float64(traffic.Rate(20_000_000))
	a, b, _, rb := meteredPair(t, []string{"10.25.0.0/24", "fd25::/64"}, map[string]any{
		"dscp": 46, "egressRate": egress, "egressBurst": 100_000,
	})
	out, err := exec.Command("ip", "netns", "exec", a.NS.Name, "sh", "-c", wipe).CombinedOutput()
	if err != nil {
		t.Fatalf("wipe in the pod: %v\n%s", err, out)
	}
	if left := strings.TrimSpace(string(out)); left != "" {
		t.Fatalf("the pod still sees QoS state after wiping it:\n%s", left)
	}
	sniff, err := traffic.Sniff(b.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	for _, v6 := range []bool{false, true} {
		dst := podIP(t, rb, v6)
		sendUDP(t, a, dst, 5003)
		got := sniff.WaitFor(func(p traffic.Packet) bool { return p.Dst == dst && p.DstPort == 5003 }, 1, 3*time.Second)
		if len(got) == 0 || got[0].DSCP != 46 {
			t.Errorf("v6=%v: packets %+v after the wipe, want DSCP 46", v6, got)
		}
	}
	// Shaping on the host drops what overflows its queue, as a network
	// would: the figure leaves out TCP's first second (slow start and its
	// recovery).
	res, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: podIP(t, rb, false), Port: 5203,
		Duration: 3 * time.Second, Omit: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("egress after the wipe %.2f Mbit/s (configured %.0f)", res.ReceivedBps/1e6, egress/1e6)
	if res.Error != "" {
		t.Fatalf("the TCP stream failed: %s", res.Error)
	}
	if !within(res.ReceivedBps, egress, 0.2) {
		t.Errorf("egress after the wipe: %.2f Mbit/s, configured %.0f", res.ReceivedBps/1e6, egress/1e6)
	}
}
