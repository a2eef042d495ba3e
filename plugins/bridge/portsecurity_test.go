package bridge

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/rawframe"
	"github.com/netclass-dev/netclass/test/traffic"
)

// A port that starts closed passes nothing, not even to its neighbour,
// until it is opened (netclass-dra does, once the attachment's policy is
// in place); its guard then drops what the pod sends from a neighbour's
// address; CHECK verifies the guard, and DEL leaves nothing of it.
func TestPortSecurity(t *testing.T) {
	h := cnitest.NewHost(t)
	closed := newNetwork(t, "blue", "blue0", []string{"10.31.0.0/24"},
		map[string]any{"portSecurity": map[string]any{"spoofCheck": true, "startClosed": true}})
	guarded := newNetwork(t, "blue", "blue0", nil, map[string]any{"portSecurity": map[string]any{"spoofCheck": true}})
	guarded.conf["ipam"], guarded.conf["dataDir"] = closed.conf["ipam"], closed.conf["dataDir"]
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h.Add(t, plugin, closed.bytes(t), a, "net1")
	rb := h.Add(t, plugin, guarded.bytes(t), b, "net1")
	hostA := bridgeport.HostVethName(a.ID, "net1")
	hostNFT := func(fn func(c *nftables.Conn) error) {
		t.Helper()
		if err := nft.InNamespace(h.NS.Path, fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := traffic.Ping(a.NS, podIP(t, rb, false), time.Second); err == nil {
		t.Fatal("a pod behind a closed port reached its neighbour")
	}
	hostNFT(func(c *nftables.Conn) error { return nft.OpenGuard(c, hostA) })
	if err := traffic.Ping(a.NS, podIP(t, rb, false), 5*time.Second); err != nil {
		t.Fatalf("after the port was opened: %v", err)
	}
	if err := h.Check(t, plugin, closed.bytes(t), ra, a, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if spoofedArrives(t, a, b, podIP(t, rb, false), podIP(t, rb, false)) {
		t.Error("a datagram from a neighbour's address crossed the guarded port")
	}
	if !spoofedArrives(t, a, b, podIP(t, ra, false), podIP(t, rb, false)) {
		t.Error("a datagram from the pod's own address did not arrive: the test proves nothing")
	}
	if err := h.Del(plugin, closed.bytes(t), a, "net1"); err != nil {
		t.Fatal(err)
	}
	hostNFT(func(c *nftables.Conn) error {
		if ok, err := nft.HasGuard(c, hostA); err != nil || ok {
			t.Errorf("after DEL the guard of %s is left (%v)", hostA, err)
		}
		if closed, err := nft.GuardClosed(c); err != nil || closed[hostA] {
			t.Errorf("after DEL %s is still in the closed set (%v)", hostA, err)
		}
		return nil
	})
}

// spoofedArrives sends a hand-built UDP datagram from pod a (its own MAC)
// with the source src to pod b's address dst, and reports whether b's
// interface got it.
func spoofedArrives(t *testing.T, a, b *cnitest.Pod, src, dst netip.Addr) bool {
	t.Helper()
	var capture *rawframe.Capture
	b.NS.Do(t, func() (err error) { capture, err = rawframe.Listen("net1"); return err })
	defer capture.Close()
	marker := []byte("netclass-spoof-" + src.String())
	payload, typ := rawframe.UDP(netip.AddrPortFrom(src, 5555), netip.AddrPortFrom(dst, 9999), marker)
	f := rawframe.Frame{Src: a.NS.Link(t, "net1").Attrs().HardwareAddr, Dst: b.NS.Link(t, "net1").Attrs().HardwareAddr, Type: typ, Payload: payload}
	a.NS.Do(t, func() error { return rawframe.Send("net1", f) })
	got, err := capture.Wait(marker, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPortSecurityNeedsSpoofCheck(t *testing.T) {
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.32.0.0/24"}, map[string]any{"portSecurity": map[string]any{"startClosed": true}})
	p := cnitest.NewPod(t)
	_, err := h.Exec(p.Call(plugin, "ADD", "net1", n.bytes(t)))
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Error(), "portSecurity.startClosed") {
		t.Fatalf("ADD: got %v, want error %d naming portSecurity.startClosed", err, types.ErrInvalidNetworkConfig)
	}
	if p.NS.HasLink(t, "net1") {
		t.Error("a refused ADD left the pod an interface")
	}
}
