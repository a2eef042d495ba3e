package bridge

import (
	"math"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// sendUDP sends one datagram from pod ns to dst:port.
func sendUDP(t *testing.T, p *cnitest.Pod, dst netip.Addr, port uint16) {
	t.Helper()
	p.NS.Do(t, func() error {
		c, err := net.Dial("udp", netip.AddrPortFrom(dst, port).String())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("netclass"))
		return err
	})
}

// dialTCP starts a TCP handshake from the pod to dst:port (a SYN is enough).
func dialTCP(t *testing.T, p *cnitest.Pod, dst netip.Addr, port uint16) {
	t.Helper()
	p.NS.Do(t, func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(dst, port).String(), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return nil // refused or timed out: the SYN went out, which is what is observed
	})
}

func TestDSCPMarkingOnTheWire(t *testing.T) {
	h := cnitest.NewHost(t)
	// The marking pod: dscp 46 for everything, 20 for TCP/80 to the pod
	// subnet except the receiver's own address range .128/25, 8 for UDP to fd00::/8.
	marked := newNetwork(t, "blue", "blue0", []string{"10.20.0.0/24", "fd20::/64"}, map[string]any{"qos": map[string]any{
		"dscp": 46,
		"egress": []any{
			map[string]any{"priority": 10, "dscp": 20, "classifier": map[string]any{
				"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.20.0.0/24", "except": []string{"10.20.0.128/25"}}}},
				"ports": []any{map[string]any{"protocol": "TCP", "port": 80}}}},
			map[string]any{"priority": 5, "dscp": 8, "classifier": map[string]any{
				"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "fd00::/8"}}},
				"ports": []any{map[string]any{"protocol": "UDP"}}}},
		},
	}})
	plain := newNetwork(t, "blue", "blue0", []string{"10.20.0.0/24", "fd20::/64"}, nil)
	plain.conf["ipam"] = marked.conf["ipam"] // one IPAM store: distinct addresses
	plain.conf["dataDir"] = marked.conf["dataDir"]
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h.Add(t, plugin, marked.bytes(t), a, "net1")
	rb := h.Add(t, plugin, plain.bytes(t), b, "net1")
	// A second address on b inside the except range, to prove except works.
	bExcept := netip.MustParseAddr("10.20.0.200")
	run(t, "ip", "-n", b.NS.Name, "addr", "add", "10.20.0.200/24", "dev", "net1")

	sniffB, err := traffic.Sniff(b.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	defer sniffB.Close()
	bv4, bv6 := podIP(t, rb, false), podIP(t, rb, true)
	if err := traffic.Ping(a.NS, bv6, 5*time.Second); err != nil { // v6 DAD and neighbours settled
		t.Fatal(err)
	}
	dialTCP(t, a, bv4, 80)
	dialTCP(t, a, bExcept, 80)
	dialTCP(t, a, bv4, 81)
	sendUDP(t, a, bv4, 5000)
	sendUDP(t, a, bv6, 5000)
	dialTCP(t, a, bv6, 80)

	av4 := podIP(t, ra, false)
	cases := []struct {
		name  string
		dst   netip.Addr
		proto uint8
		port  uint16
		want  uint8
	}{
		{"rule: TCP/80 to the subnet", bv4, 6, 80, 20},
		{"except range falls back to the attachment", bExcept, 6, 80, 46},
		{"other port: attachment dscp", bv4, 6, 81, 46},
		{"UDP v4: attachment dscp", bv4, 17, 5000, 46},
		{"UDP to fd00::/8 (v6 rule)", bv6, 17, 5000, 8},
		{"TCP/80 over v6: v4-only rule does not apply", bv6, 6, 80, 46},
	}
	for _, c := range cases {
		got := sniffB.WaitFor(func(p traffic.Packet) bool {
			return p.Src.Is4() == c.dst.Is4() && p.Dst == c.dst && p.Proto == c.proto && p.DstPort == c.port
		}, 1, 3*time.Second)
		if len(got) == 0 {
			t.Errorf("%s: no packet seen", c.name)
			continue
		}
		if got[0].DSCP != c.want {
			t.Errorf("%s: DSCP %d on the wire, want %d", c.name, got[0].DSCP, c.want)
		}
	}
	// Traffic of the unmarked pod carries no DSCP.
	sniffA, err := traffic.Sniff(a.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	defer sniffA.Close()
	sendUDP(t, b, av4, 5001)
	got := sniffA.WaitFor(func(p traffic.Packet) bool { return p.Dst == av4 && p.DstPort == 5001 }, 1, 3*time.Second)
	if len(got) == 0 || got[0].DSCP != 0 {
		t.Errorf("unmarked pod's packet: %+v, want DSCP 0", got)
	}
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

func TestShapingRates(t *testing.T) {
	egress, ingress := float64(traffic.Rate(20_000_000)), float64(traffic.Rate(10_000_000)) // bits/s
	h := cnitest.NewHost(t)
	shaped := newNetwork(t, "blue", "blue0", []string{"10.21.0.0/24"}, map[string]any{"qos": map[string]any{
		"egressRate": egress, "egressBurst": 100_000, "ingressRate": ingress, "ingressBurst": 100_000,
	}})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h.Add(t, plugin, shaped.bytes(t), a, "net1")
	plain := newNetwork(t, "blue", "blue0", []string{"10.21.0.0/24"}, nil)
	plain.conf["ipam"], plain.conf["dataDir"] = shaped.conf["ipam"], shaped.conf["dataDir"]
	rb := h.Add(t, plugin, plain.bytes(t), b, "net1")

	// Egress is shaped on the host end, which drops what overflows the
	// shaper's queue as a network would: measured after TCP's first second.
	res, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: podIP(t, rb, false), Port: 7001,
		Duration: 2 * time.Second, Omit: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != "" {
		t.Fatalf("egress: %s", res.Error)
	}
	out := res.ReceivedBps
	if !within(out, egress, 0.2) {
		t.Errorf("egress: measured %.1f Mbit/s, configured %.1f", out/1e6, egress/1e6)
	}
	in, err := traffic.TCPRate(b.NS, a.NS, podIP(t, ra, false), 7002, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !within(in, ingress, 0.2) {
		t.Errorf("ingress: measured %.1f Mbit/s, configured %.1f", in/1e6, ingress/1e6)
	}
	t.Logf("egress %.2f Mbit/s (configured %.0f), ingress %.2f Mbit/s (configured %.0f)", out/1e6, egress/1e6, in/1e6, ingress/1e6)
}

func TestMeteredRuleDropsTheExcess(t *testing.T) {
	meterKbps := float64(traffic.Rate(4000))
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.22.0.0/24"}, map[string]any{"qos": map[string]any{
		"egress": []any{map[string]any{"priority": 1, "dscp": 10,
			"classifier": map[string]any{"ports": []any{map[string]any{"protocol": "UDP", "port": 6000}}},
			"bandwidth":  map[string]any{"rate": meterKbps, "burst": meterKbps / 10}}},
	}})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	h.Add(t, plugin, n.bytes(t), a, "net1")
	rb := h.Add(t, plugin, n.bytes(t), b, "net1")
	dst := podIP(t, rb, false)

	const d, warmup = 3 * time.Second, time.Second
	metered, err := traffic.UDPRate(a.NS, b.NS, dst, 6000, 1200, 4*meterKbps*1000, d, warmup)
	if err != nil {
		t.Fatal(err)
	}
	if !within(metered.SteadyBps, meterKbps*1000, 0.2) {
		t.Errorf("metered flow: %.2f Mbit/s received, rule rate %.2f", metered.SteadyBps/1e6, meterKbps/1e3)
	}
	// Everything that passed: the rate for the whole flow plus one bucket
	// (max(burst, 1 s of rate): 4000 kbit), with 20% slack.
	allowance := (meterKbps*1000*d.Seconds() + meterKbps*1000) / 8 * 1.2
	if float64(metered.TotalBytes) > allowance {
		t.Errorf("metered flow passed %d bytes in %s, more than rate plus one bucket (%.0f)", metered.TotalBytes, d, allowance)
	}
	free, err := traffic.UDPRate(a.NS, b.NS, dst, 6001, 1200, 2*meterKbps*1000, d, warmup)
	if err != nil {
		t.Fatal(err)
	}
	if free.SteadyBps < 1.5*meterKbps*1000 {
		t.Errorf("unmatched flow was cut to %.2f Mbit/s (offered %.2f)", free.SteadyBps/1e6, 2*meterKbps/1e3)
	}
	t.Logf("metered %.2f Mbit/s (rule %.2f), unmatched %.2f Mbit/s", metered.SteadyBps/1e6, meterKbps/1e3, free.SteadyBps/1e6)
}

// A metered rule's rate edited on a running attachment (what netclass-dra's
// rule agent does when a NetworkQoS changes: qosport.SyncInterfaces, in the
// host's namespace) is what the flow then gets, the attachment untouched.
func TestMeterRateEditedInPlace(t *testing.T) {
	meterKbps := traffic.Rate(4000)
	rule := func(kbps int64) qos.Rule {
		return qos.Rule{Priority: 1, DSCP: ptr(10),
			Classifier: qos.Classifier{Ports: []qos.Port{{Protocol: "UDP", Port: ptr(6000)}}},
			Bandwidth:  &qos.Bandwidth{Rate: kbps, Burst: kbps / 10}}
	}
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.22.0.0/24"}, map[string]any{"qos": map[string]any{
		"egress": []any{rule(meterKbps)},
	}})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	h.Add(t, plugin, n.bytes(t), a, "net1")
	dst := podIP(t, h.Add(t, plugin, n.bytes(t), b, "net1"), false)
	const d, warmup = 3 * time.Second, time.Second
	for _, kbps := range []int64{meterKbps, meterKbps / 2} {
		plan := qos.Compile(&qos.Spec{Egress: []qos.Rule{rule(kbps)}})
		var res []qosport.Result
		h.NS.Do(t, func() error {
			res = qosport.SyncInterfaces([]qosport.Interface{{PodNS: a.NS.Path, IfName: "net1", Plan: plan}})
			return res[0].Err
		})
		if wantChanged := kbps != meterKbps; res[0].Changed != wantChanged {
			t.Errorf("rate %d kbps: changed %v, want %v", kbps, res[0].Changed, wantChanged)
		}
		got, err := traffic.UDPRate(a.NS, b.NS, dst, 6000, 1200, 4*float64(kbps)*1000, d, warmup)
		if err != nil {
			t.Fatal(err)
		}
		if !within(got.SteadyBps, float64(kbps)*1000, 0.2) {
			t.Errorf("rule rate %d kbps: %.2f Mbit/s received", kbps, got.SteadyBps/1e6)
		}
		t.Logf("rule rate %d kbps: %.2f Mbit/s received", kbps, got.SteadyBps/1e6)
	}
}

func ptr[T any](v T) *T { return &v }
