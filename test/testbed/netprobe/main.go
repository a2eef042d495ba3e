// Command netprobe runs inside the test bed's pods (it is packed into the
// bed's image next to busybox) and does what an ordinary pod's process
// with the default capabilities (CAP_NET_RAW, not CAP_NET_ADMIN) can do to
// escape a NetworkPolicy or impersonate a neighbour: it sends hand-built
// Ethernet frames through an AF_PACKET socket (test/rawframe).
//
//	netprobe udp IFNAME DST_MAC DST_IP:PORT MARKER [SRC_MAC [SRC_IP]]   a UDP datagram (default: the interface's own MAC and first address)
//	netprobe ra IFNAME                                                  an IPv6 router advertisement from the interface's link-local address
//	netprobe raw IFNAME DST_MAC MARKER                                  a frame of an experimental ethertype (neither IP nor ARP)
//	netprobe flush                                                      delete every nftables table and qdisc in the pod's namespace (needs CAP_NET_ADMIN)
package main

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"

	"github.com/netclass-dev/netclass/test/rawframe"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "netprobe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 1 && args[0] == "flush" {
		return flush()
	}
	if len(args) < 2 {
		return fmt.Errorf("usage: netprobe udp|ra|raw IFNAME [ARG], or netprobe flush")
	}
	ifi, err := net.InterfaceByName(args[1])
	if err != nil {
		return err
	}
	switch args[0] {
	case "udp":
		return udp(ifi, args[2:])
	case "ra":
		ll, err := own(ifi, func(a netip.Addr) bool { return a.IsLinkLocalUnicast() && a.Is6() })
		if err != nil {
			return err
		}
		return rawframe.Send(ifi.Name, rawframe.Frame{Src: ifi.HardwareAddr, Dst: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1},
			Type: rawframe.EtherIPv6, Payload: rawframe.RouterAdvertisement(ll)})
	case "raw":
		if len(args) != 4 {
			return fmt.Errorf("usage: netprobe raw IFNAME DST_MAC MARKER")
		}
		dst, err := net.ParseMAC(args[2])
		if err != nil {
			return err
		}
		return rawframe.Send(ifi.Name, rawframe.Frame{Src: ifi.HardwareAddr, Dst: dst, Type: rawframe.EtherExperimental, Payload: []byte(args[3])})
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func udp(ifi *net.Interface, args []string) error {
	if len(args) < 3 || len(args) > 5 {
		return fmt.Errorf("usage: netprobe udp IFNAME DST_MAC DST_IP:PORT MARKER [SRC_MAC [SRC_IP]]")
	}
	dstMAC, err := net.ParseMAC(args[0])
	if err != nil {
		return err
	}
	dst, err := netip.ParseAddrPort(args[1])
	if err != nil {
		return err
	}
	srcMAC := ifi.HardwareAddr
	if len(args) > 3 {
		if srcMAC, err = net.ParseMAC(args[3]); err != nil {
			return err
		}
	}
	var src netip.Addr
	if len(args) > 4 {
		src, err = netip.ParseAddr(args[4])
	} else {
		src, err = own(ifi, func(a netip.Addr) bool { return a.Is4() == dst.Addr().Is4() && !a.IsLinkLocalUnicast() })
	}
	if err != nil {
		return err
	}
	// a new source port each time: a datagram of an earlier flow would be
	// conntrack's established traffic, which a policy lets through
	sport := uint16(20000 + mrand.IntN(40000))
	payload, typ := rawframe.UDP(netip.AddrPortFrom(src, sport), dst, []byte(args[2]))
	return rawframe.Send(ifi.Name, rawframe.Frame{Src: srcMAC, Dst: dstMAC, Type: typ, Payload: payload})
}

// own returns the interface's first address that ok accepts.
func own(ifi *net.Interface, ok func(netip.Addr) bool) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && ok(p.Addr()) {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no such address", ifi.Name)
}
