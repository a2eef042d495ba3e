package sriov

import (
	"math"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// receiver is the address of the network behind the VFs: a bridge in the
// wire namespace joining every stand-in VF's other end.
var receiver = netip.MustParseAddr("10.45.0.254")

func wired(t *testing.T, vfs int) *rig {
	t.Helper()
	r := newRig(t, "pf0", vfs, nil)
	run(t, "ip", "-n", r.wire.Name, "link", "add", "sw", "type", "bridge")
	for i := range vfs {
		run(t, "ip", "-n", r.wire.Name, "link", "set", "wire"+string(rune('0'+i)), "master", "sw")
	}
	run(t, "ip", "-n", r.wire.Name, "addr", "add", receiver.String()+"/24", "dev", "sw")
	run(t, "ip", "-n", r.wire.Name, "link", "set", "sw", "up")
	return r
}

func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

// Shaping on a VF: egress by tbf on the VF netdev, ingress through an IFB
// in the pod (a VF has no host end to shape), measured with TCP.
func TestShapingOnAVF(t *testing.T) {
	const egress, ingress = 8_000_000, 4_000_000
	r := wired(t, 1)
	n := newNetwork(t, r, "10.45.0.0/24", map[string]any{"qos": map[string]any{
		"egressRate": egress, "egressBurst": 100_000, "ingressRate": ingress, "ingressBurst": 100_000,
	}})
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, n.bytes(t), p, "net1")
	out, err := traffic.TCPRate(p.NS, r.wire, receiver, 7001, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in, err := traffic.TCPRate(r.wire, p.NS, firstIP(t, res), 7002, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !within(out, egress, 0.2) {
		t.Errorf("egress: measured %.2f Mbit/s, configured %.0f", out/1e6, egress/1e6)
	}
	if !within(in, ingress, 0.2) {
		t.Errorf("ingress: measured %.2f Mbit/s, configured %.0f", in/1e6, ingress/1e6)
	}
	t.Logf("egress %.2f Mbit/s (configured %.0f), ingress %.2f Mbit/s (configured %.0f)", out/1e6, egress/1e6, in/1e6, ingress/1e6)
}

// DSCP marking and a metered rule on a VF, seen on the wire behind it.
func TestDSCPAndMeterOnAVF(t *testing.T) {
	const meterKbps = 4000
	r := wired(t, 1)
	n := newNetwork(t, r, "10.45.0.0/24", map[string]any{"qos": map[string]any{
		"dscp": 46,
		"egress": []any{
			map[string]any{"priority": 10, "dscp": 20, "classifier": map[string]any{"ports": []any{map[string]any{"protocol": "TCP", "port": 80}}}},
			map[string]any{"priority": 5, "dscp": 10, "classifier": map[string]any{"ports": []any{map[string]any{"protocol": "UDP", "port": 6000}}},
				"bandwidth": map[string]any{"rate": meterKbps, "burst": 400}},
		},
	}})
	p := cnitest.NewPod(t)
	r.h.Add(t, pluginName, n.bytes(t), p, "net1")
	sniff, err := traffic.Sniff(r.wire, "sw")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	if err := traffic.Ping(p.NS, receiver, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	send(t, p, "tcp", 80)
	send(t, p, "udp", 5000)
	for _, c := range []struct {
		proto uint8
		port  uint16
		want  uint8
	}{{6, 80, 20}, {17, 5000, 46}} {
		got := sniff.WaitFor(func(pk traffic.Packet) bool { return pk.Dst == receiver && pk.Proto == c.proto && pk.DstPort == c.port }, 1, 3*time.Second)
		if len(got) == 0 {
			t.Errorf("proto %d port %d: no packet on the wire", c.proto, c.port)
		} else if got[0].DSCP != c.want {
			t.Errorf("proto %d port %d: DSCP %d on the wire, want %d", c.proto, c.port, got[0].DSCP, c.want)
		}
	}
	metered, err := traffic.UDPRate(p.NS, r.wire, receiver, 6000, 1200, 4*meterKbps*1000, 3*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !within(metered.SteadyBps, meterKbps*1000, 0.2) {
		t.Errorf("metered flow: %.2f Mbit/s received, rule rate %.2f", metered.SteadyBps/1e6, meterKbps/1e3)
	}
	t.Logf("metered flow %.2f Mbit/s (rule %.2f)", metered.SteadyBps/1e6, meterKbps/1e3)
}

// send opens a TCP connection (a SYN is enough) or sends a UDP datagram
// from the pod to the receiver.
func send(t *testing.T, p *cnitest.Pod, network string, port uint16) {
	t.Helper()
	p.NS.Do(t, func() error {
		c, err := net.DialTimeout(network, netip.AddrPortFrom(receiver, port).String(), 200*time.Millisecond)
		if err != nil {
			return nil // refused or timed out: the first packet went out
		}
		defer c.Close()
		if network == "udp" {
			_, err = c.Write([]byte("netclass"))
		}
		return err
	})
}
