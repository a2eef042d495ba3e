// Package traffic sends and observes real packets between network
// namespaces: ICMP echo, TCP and UDP streams with measured rates, and a
// packet sniffer that reports the DSCP of what crosses an interface; and it
// makes the named namespaces they run in. netclass-demo checks its scenario
// with it, and the tests through test/traffic.
package traffic

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Ping sends ICMP echo requests from ns to dst, one every 100 ms, until one
// is answered (nil) or timeout passes (an error).
func Ping(ns *NS, dst netip.Addr, timeout time.Duration) error {
	network, proto, typ := "ip4:icmp", 1, icmp.Type(ipv4.ICMPTypeEcho)
	if dst.Is6() {
		network, proto, typ = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest
	}
	var conn *icmp.PacketConn
	if err := ns.Run(func() (err error) {
		conn, err = icmp.ListenPacket(network, "")
		return err
	}); err != nil {
		return fmt.Errorf("open icmp socket in %s: %w", ns.Name, err)
	}
	defer conn.Close()
	id := os.Getpid() & 0xffff
	deadline := time.Now().Add(timeout)
	for seq := 1; time.Now().Before(deadline); seq++ {
		msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("netclass")}}
		b, err := msg.Marshal(nil)
		if err != nil {
			return err
		}
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil && !isUnreachable(err) {
			return fmt.Errorf("send echo to %s: %w", dst, err)
		}
		if replied(conn, proto, id, seq, min(time.Until(deadline), 100*time.Millisecond)) {
			return nil
		}
	}
	return fmt.Errorf("%s: no echo reply from %s within %s", ns.Name, dst, timeout)
}

func replied(conn *icmp.PacketConn, proto, id, seq int, wait time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 1500)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return false
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq &&
			(m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply) {
			return true
		}
	}
}

func isUnreachable(err error) bool {
	var se *os.SyscallError
	return errors.As(err, &se) // EHOSTUNREACH / ENETUNREACH: keep trying until the deadline
}
