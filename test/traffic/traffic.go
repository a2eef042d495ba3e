// Package traffic is demo/traffic for tests: the same pings, rates and
// sniffer between the namespaces of test/nstest, and the rates a test can
// measure where it runs (Rate).
package traffic

import (
	"net/netip"
	"time"

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
