package nft

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/rawframe"
	"github.com/netclass-dev/netclass/test/traffic"
)

// The guard of an interface without a host end, in its pod: closed it
// passes nothing either way; opened, what the pod sends as itself passes
// and what it builds itself from another address or MAC does not.
func TestPodGuard(t *testing.T) {
	a, b := nstest.New(t), nstest.New(t)
	nstest.Veth(t, a, "net1", "10.6.0.1/24", b, "net1", "10.6.0.2/24")
	macA, macB := a.Link(t, "net1").Attrs().HardwareAddr, b.Link(t, "net1").Attrs().HardwareAddr
	ipA, ipB := netip.MustParseAddr("10.6.0.1"), netip.MustParseAddr("10.6.0.2")
	inA := func(fn func(c *nftables.Conn) error) {
		t.Helper()
		if err := InNamespace(a.Path, fn); err != nil {
			t.Fatal(err)
		}
	}
	g := Guard{MAC: macA, CheckIPs: true, V4: []netip.Addr{ipA}, V6: []netip.Addr{a.LinkLocal(t, "net1")}}
	inA(func(c *nftables.Conn) error { return InstallPodGuard(c, "net1", g, true) })
	arrives := func(from, to *nstest.NS, src net.HardwareAddr, srcIP, dstIP netip.Addr, dst net.HardwareAddr) bool {
		t.Helper()
		var capture *rawframe.Capture
		to.Do(t, func() (err error) { capture, err = rawframe.Listen("net1"); return err })
		defer capture.Close()
		marker := []byte(fmt.Sprintf("netclass-%d", time.Now().UnixNano()))
		payload, typ := rawframe.UDP(netip.AddrPortFrom(srcIP, 5555), netip.AddrPortFrom(dstIP, 9), marker)
		err := from.Run(func() error {
			return rawframe.Send("net1", rawframe.Frame{Src: src, Dst: dst, Type: typ, Payload: payload})
		})
		if errors.Is(err, unix.ENOBUFS) {
			return false // dropped at the sender's egress hook, which a packet socket is told
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := capture.Wait(marker, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if traffic.Ping(a, ipB, time.Second) == nil || traffic.Ping(b, ipA, time.Second) == nil {
		t.Fatal("a closed interface passed a ping")
	}
	inA(func(c *nftables.Conn) error {
		if opened, err := OpenPodGuard(c, "net1"); err != nil || !opened {
			return fmt.Errorf("open: %v, %v", opened, err)
		}
		return CheckPodGuard(c, "net1", g)
	})
	for _, tc := range []struct {
		name   string
		mac    net.HardwareAddr
		ip     netip.Addr
		arrive bool
	}{
		{"own MAC and address", macA, ipA, true},
		{"another address", macA, netip.MustParseAddr("10.6.0.9"), false},
		{"another MAC", net.HardwareAddr{2, 0, 0, 0, 0, 7}, ipA, false},
	} {
		if got := arrives(a, b, tc.mac, tc.ip, ipB, macB); got != tc.arrive {
			t.Errorf("%s: arrived %v, want %v", tc.name, got, tc.arrive)
		}
	}
	if err := traffic.Ping(b, ipA, 5*time.Second); err != nil {
		t.Errorf("an opened interface: %v", err)
	}
	// opened by adding (its closed chains accept first), tidied by the next call
	inA(func(c *nftables.Conn) error {
		if st, err := podGuardState(c, "net1"); err != nil || st != podOpenedByRules {
			return fmt.Errorf("after opening: state %v (%v), want the closed chains accepting first", st, err)
		}
		if opened, err := OpenPodGuard(c, "net1"); err != nil || opened {
			return fmt.Errorf("opening again: %v, %v; want nothing to open", opened, err)
		}
		if st, err := podGuardState(c, "net1"); err != nil || st != podOpen {
			return fmt.Errorf("after opening again: state %v (%v), want the closed chains gone", st, err)
		}
		return CheckPodGuard(c, "net1", g)
	})
	if err := traffic.Ping(b, ipA, 5*time.Second); err != nil {
		t.Errorf("a tidied interface: %v", err)
	}
	inA(func(c *nftables.Conn) error { return DeletePodGuard(c, "net1") })
}
