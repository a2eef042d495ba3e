// Package traffic is demo/traffic for tests: the same pings, rates and
// sniffer between the namespaces of test/nstest, and the rates a test can
// measure where it runs (Rate).
package traffic

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	demotraffic "github.com/netclass-dev/netclass/demo/traffic"
	"github.com/netclass-dev/netclass/test/nstest"
)

// Packet, Sniffer and UDPResult are demo/traffic's.
type (
	Packet    = demotraffic.Packet
	Sniffer   = demotraffic.Sniffer
	UDPResult = demotraffic.UDPResult
)

func ns(n *nstest.NS) *demotraffic.NS { return &demotraffic.NS{Name: n.Name, Path: n.Path} }

// Ping is demotraffic.Ping from a test namespace.
func Ping(n *nstest.NS, dst netip.Addr, timeout time.Duration) error {
	return demotraffic.Ping(ns(n), dst, timeout)
}

// Sniff is demotraffic.Sniff in a test namespace.
func Sniff(n *nstest.NS, ifname string) (*Sniffer, error) { return demotraffic.Sniff(ns(n), ifname) }

// TCPRate is demotraffic.TCPRate between test namespaces.
func TCPRate(client, server *nstest.NS, addr netip.Addr, port uint16, d time.Duration) (float64, error) {
	return demotraffic.TCPRate(ns(client), ns(server), addr, port, d)
}

// UDPRate is demotraffic.UDPRate between test namespaces.
func UDPRate(client, server *nstest.NS, addr netip.Addr, port uint16, size int, offeredBps float64, d, warmup time.Duration) (UDPResult, error) {
	return demotraffic.UDPRate(ns(client), ns(server), addr, port, size, offeredBps, d, warmup)
}

// SendUDP sends count datagrams from n to dst:port, one every interval, with
// tos as their IPv4 TOS or IPv6 traffic class byte (DSCP << 2 | ECN): what a
// pod that marks its own packets sends.
func SendUDP(n *nstest.NS, dst netip.Addr, port uint16, tos uint8, count int, interval time.Duration) error {
	return n.Run(func() error {
		// Unconnected: an ICMP error for one datagram (no listener) must
		// not fail the next write.
		c, err := net.ListenPacket("udp", ":0")
		if err != nil {
			return err
		}
		defer c.Close()
		if dst.Is4() {
			err = ipv4.NewPacketConn(c).SetTOS(int(tos))
		} else {
			err = ipv6.NewPacketConn(c).SetTrafficClass(int(tos))
		}
		if err != nil {
			return fmt.Errorf("set tos %#x: %w", tos, err)
		}
		to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, port))
		for i := range count {
			if i > 0 {
				time.Sleep(interval) // pacing the sender, not waiting for a condition
			}
			if _, err := c.WriteTo(fmt.Appendf(nil, "netclass %d", i), to); err != nil {
				return err
			}
		}
		return nil
	})
}
