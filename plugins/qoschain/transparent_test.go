package qoschain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// On an interface without a host end (macvlan here) the meters sit at the
// interface's egress hook in the pod: an application sending UDP at three
// times a rule's rate sees no error, and a TCP stream converges near
// another rule's rate without failing.
func TestMetersAreTransparentAfterUpstreamMacvlan(t *testing.T) {
	meterKbps := float64(traffic.Rate(5000))
	h := cnitest.NewHost(t)
	peer := cnitest.NewPod(t) // the other end of the master link
	run(t, "ip", "-n", h.NS.Name, "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink0", "netns", peer.NS.Name)
	run(t, "ip", "-n", h.NS.Name, "link", "set", "uplink0", "up")
	run(t, "ip", "-n", peer.NS.Name, "link", "set", "uplink0", "up")
	cni := h.CNI(t)
	main := map[string]any{"type": "macvlan", "master": "uplink0", "mode": "bridge", "ipam": ipam(t, "10.33.0.0/24")}
	rule := func(proto string, port int) map[string]any {
		return map[string]any{"priority": 1, "dscp": 10,
			"classifier": map[string]any{"ports": []any{map[string]any{"protocol": proto, "port": port}}},
			"bandwidth":  map[string]any{"rate": meterKbps, "burst": meterKbps / 10}}
	}
	metered := confList(t, "mv", main, map[string]any{"type": "netclass-qos", "dataDir": t.TempDir(),
		"qos": map[string]any{"egress": []any{rule("UDP", 5201), rule("TCP", 5202)}}})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	addList(t, h, cni, metered, a)
	rb := addList(t, h, cni, confList(t, "mv", main), b)
	if err := traffic.Ping(a.NS, ipOf(t, rb), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	udp, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: ipOf(t, rb), Port: 5201,
		UDPBps: 3 * meterKbps * 1000, Duration: 4 * time.Second, Omit: 2 * time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UDP: sent %.2f Mbit/s, received %.2f Mbit/s (rule %.2f)", udp.SentBps/1e6, udp.ReceivedBps/1e6, meterKbps/1e3)
	if udp.Error != "" {
		t.Errorf("the UDP sender got an error: %s", udp.Error)
	} else if !within(udp.ReceivedBps, meterKbps*1000, 0.15) {
		t.Errorf("UDP received %.2f Mbit/s, rule rate %.2f", udp.ReceivedBps/1e6, meterKbps/1e3)
	}
	tcp, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: ipOf(t, rb), Port: 5202,
		Duration: 5 * time.Second, Omit: 2 * time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TCP: received %.2f Mbit/s (rule %.2f), %d retransmissions", tcp.ReceivedBps/1e6, meterKbps/1e3, tcp.Retransmits)
	if tcp.Error != "" {
		t.Errorf("the TCP stream failed: %s", tcp.Error)
	} else if !within(tcp.ReceivedBps, meterKbps*1000, 0.2) {
		t.Errorf("TCP received %.2f Mbit/s, rule rate %.2f", tcp.ReceivedBps/1e6, meterKbps/1e3)
	}
}

func within(got, want, frac float64) bool { return got >= want*(1-frac) && got <= want*(1+frac) }

// confList is a conflist of the given plugins.
func confList(t *testing.T, name string, plugins ...map[string]any) *libcni.NetworkConfigList {
	t.Helper()
	b, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": name, "plugins": plugins})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return list
}
