package traffic

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/netclass-dev/netclass/test/nstest"
)

// RTTs sends count ICMP echo requests from n to dst, one every interval,
// and returns the round-trip time of each one answered, and how many were
// not (no reply within a second of the last request).
func RTTs(n *nstest.NS, dst netip.Addr, count int, interval time.Duration) ([]time.Duration, int, error) {
	network, proto, typ, reply := "ip4:icmp", 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	if dst.Is6() {
		network, proto, typ, reply = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	var conn *icmp.PacketConn
	if err := n.Run(func() (err error) { conn, err = icmp.ListenPacket(network, ""); return err }); err != nil {
		return nil, 0, fmt.Errorf("open icmp socket in %s: %w", n.Name, err)
	}
	defer conn.Close()
	var idb [2]byte
	rand.Read(idb[:])
	id := int(binary.BigEndian.Uint16(idb[:]))
	var mu sync.Mutex
	sent, got := make([]time.Time, count), make([]time.Duration, count)
	done := make(chan struct{})
	go func() { // replies, matched by id and sequence
		defer close(done)
		buf := make([]byte, 1500)
		for {
			k, _, err := conn.ReadFrom(buf)
			if err != nil {
				return // the deadline after the last request
			}
			at := time.Now()
			m, err := icmp.ParseMessage(proto, buf[:k])
			if err != nil || m.Type != reply {
				continue
			}
			e, ok := m.Body.(*icmp.Echo)
			if !ok || e.ID != id || e.Seq < 0 || e.Seq >= count {
				continue
			}
			mu.Lock()
			got[e.Seq] = at.Sub(sent[e.Seq])
			mu.Unlock()
		}
	}()
	to := &net.IPAddr{IP: dst.AsSlice()}
	for seq := range count {
		b, _ := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("netclass rtt")}}).Marshal(nil)
		mu.Lock()
		sent[seq] = time.Now()
		mu.Unlock()
		if _, err := conn.WriteTo(b, to); err != nil {
			return nil, 0, fmt.Errorf("send echo %d to %s: %w", seq, dst, err)
		}
		time.Sleep(interval) // pacing the probes, not waiting for a condition
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	<-done
	var rtts []time.Duration
	for _, d := range got {
		if d > 0 {
			rtts = append(rtts, d)
		}
	}
	return rtts, count - len(rtts), nil
}

// Quantile returns the q-quantile (0 < q <= 1) of ds by the nearest-rank
// method; 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}
