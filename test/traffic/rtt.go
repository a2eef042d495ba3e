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
	network, typ := "ip4:icmp", icmp.Type(ipv4.ICMPTypeEcho)
	r := &echoRun{proto: 1, reply: ipv4.ICMPTypeEchoReply, count: count,
		sent: make([]time.Time, count), got: make([]time.Duration, count)}
	if dst.Is6() {
		network, typ, r.proto, r.reply = "ip6:ipv6-icmp", ipv6.ICMPTypeEchoRequest, 58, ipv6.ICMPTypeEchoReply
	}
	if err := n.Run(func() (err error) { r.conn, err = icmp.ListenPacket(network, ""); return err }); err != nil {
		return nil, 0, fmt.Errorf("open icmp socket in %s: %w", n.Name, err)
	}
	defer r.conn.Close()
	var idb [2]byte
	rand.Read(idb[:])
	r.id = int(binary.BigEndian.Uint16(idb[:]))
	done := make(chan struct{})
	go r.receive(done)
	to := &net.IPAddr{IP: dst.AsSlice()}
	for seq := range count {
		b, _ := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: r.id, Seq: seq, Data: []byte("netclass rtt")}}).Marshal(nil)
		r.mu.Lock()
		r.sent[seq] = time.Now()
		r.mu.Unlock()
		if _, err := r.conn.WriteTo(b, to); err != nil {
			return nil, 0, fmt.Errorf("send echo %d to %s: %w", seq, dst, err)
		}
		time.Sleep(interval) // pacing the probes, not waiting for a condition
	}
	r.conn.SetReadDeadline(time.Now().Add(time.Second))
	<-done
	var rtts []time.Duration
	for _, d := range r.got {
		if d > 0 {
			rtts = append(rtts, d)
		}
	}
	return rtts, count - len(rtts), nil
}

// echoRun is one RTTs: its socket, and each request's send time and
// round-trip time (0: no reply yet), by sequence number.
type echoRun struct {
	conn      *icmp.PacketConn
	proto     int
	reply     icmp.Type
	id, count int
	mu        sync.Mutex
	sent      []time.Time
	got       []time.Duration
}

// receive records the replies, matched by id and sequence, until the
// socket's deadline (set after the last request), then closes done.
func (r *echoRun) receive(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 1500)
	for {
		k, _, err := r.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		at := time.Now()
		m, err := icmp.ParseMessage(r.proto, buf[:k])
		if err != nil || m.Type != r.reply {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || e.ID != r.id || e.Seq < 0 || e.Seq >= r.count {
			continue
		}
		r.mu.Lock()
		r.got[e.Seq] = at.Sub(r.sent[e.Seq])
		r.mu.Unlock()
	}
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
