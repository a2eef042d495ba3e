package harness

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// ProbeTimeout is how long a probe waits for an answer before it calls the
// port closed (the pods are hosts of this machine: answers take
// microseconds).
const ProbeTimeout = time.Second

// Listeners serve a pod's ports from inside its network namespace: TCP
// ports accept and close, UDP ports echo, and a raw SCTP socket records the
// INITs that arrive (this kernel has no SCTP sockets; a raw socket sees an
// SCTP packet once it passed the namespace's input hook, which is what a
// policy decides).
type Listeners struct {
	mu      sync.Mutex
	closers []func() error
	inits   map[uint32]bool // initiate tags of the SCTP INITs received
	arrived chan struct{}   // closed and replaced at every INIT
	// udpSources counts the source ports of the UDP probes sent to these
	// listeners (udpSourcePort).
	udpSources atomic.Uint32
}

// The source ports of UDP probes: below the kernel's ephemeral range
// (32768 and up), so no socket the kernel numbered holds one.
const (
	udpSourceFirst = 10000
	udpSourceCount = 20000
)

// udpSourcePort is the source port of the next UDP probe to these
// listeners: each probe to a pod's port is a new flow. A port the kernel
// chose could repeat one of a probe seconds before, and while conntrack
// remembers that flow (30 s after its answer) the new probe is part of it,
// allowed whatever a policy written since says. A pod's probes go round
// the 20,000 ports in several minutes.
func (l *Listeners) udpSourcePort() int {
	for {
		old := l.udpSources.Load()
		next := (old + 1) % udpSourceCount
		if l.udpSources.CompareAndSwap(old, next) {
			return udpSourceFirst + int(next)
		}
	}
}

// Listen opens the listeners in the network namespace at nsPath; they close
// at the test's end.
func Listen(t testing.TB, nsPath string, tcp, udp []int) *Listeners {
	t.Helper()
	l := &Listeners{inits: map[uint32]bool{}, arrived: make(chan struct{})}
	var start [4]byte
	rand.Read(start[:])
	l.udpSources.Store(binary.BigEndian.Uint32(start[:]) % udpSourceCount)
	t.Cleanup(l.close)
	err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		for _, p := range tcp {
			if err := l.serveTCP(p); err != nil {
				return err
			}
		}
		for _, p := range udp {
			if err := l.serveUDP(p); err != nil {
				return err
			}
		}
		return l.serveSCTP()
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", nsPath, err)
	}
	return l
}

func (l *Listeners) close() {
	for _, c := range l.closers {
		c()
	}
}

func (l *Listeners) serveTCP(port int) error {
	ln, err := net.Listen("tcp4", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	l.closers = append(l.closers, ln.Close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return nil
}

func (l *Listeners) serveUDP(port int) error {
	pc, err := net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	l.closers = append(l.closers, pc.Close)
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	return nil
}

func (l *Listeners) serveSCTP() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_SCTP)
	if err != nil {
		return fmt.Errorf("raw SCTP socket: %w", err)
	}
	f := fdFile{fd}
	l.closers = append(l.closers, f.Close)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return
			}
			if tag, ok := initTag(buf[:n]); ok {
				l.mu.Lock()
				l.inits[tag] = true
				close(l.arrived)
				l.arrived = make(chan struct{})
				l.mu.Unlock()
			}
		}
	}()
	return nil
}

type fdFile struct{ fd int }

// Close shuts the socket down first: a Recvfrom blocked on it returns.
func (f fdFile) Close() error {
	unix.Shutdown(f.fd, unix.SHUT_RDWR)
	return unix.Close(f.fd)
}

// waitInit waits for the INIT with the tag until ctx ends.
func (l *Listeners) waitInit(ctx context.Context, tag uint32) bool {
	for {
		l.mu.Lock()
		seen, arrived := l.inits[tag], l.arrived
		l.mu.Unlock()
		if seen {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-arrived:
		}
	}
}

// Probe reports whether a connection from the namespace at nsPath to
// addr:port passes: TCP connects, UDP gets its echo, an SCTP INIT reaches
// server (the Listeners of addr's pod). A probe that gets no answer within
// ProbeTimeout is closed; any other failure (refused, unreachable) is an
// error: every probed port has a listener.
func Probe(nsPath string, proto corev1.Protocol, addr netip.Addr, port int, server *Listeners) (open bool, err error) {
	if proto == corev1.ProtocolTCP {
		return probeTCP(nsPath, addr, port)
	}
	err = ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		switch proto {
		case corev1.ProtocolUDP:
			open, err = probeUDP(addr, port, server)
		case corev1.ProtocolSCTP:
			open, err = probeSCTP(addr, port, server)
		default:
			err = fmt.Errorf("protocol %q", proto)
		}
		return err
	})
	return open, err
}

// tcpTries bounds the connection attempts of one TCP probe.
const tcpTries = 4

// probeTCP connects from the namespace at nsPath. The kernel sends a SYN
// again only after its initial RTO (a second, ProbeTimeout), so one lost
// SYN would read as a closed port: like the UDP and SCTP probes, it tries
// again every quarter of ProbeTimeout, from a new socket, while the earlier
// tries still wait. The first connection made answers. Each try enters the
// namespace on its own goroutine (a namespace is a thread's).
func probeTCP(nsPath string, addr netip.Addr, port int) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	target := netip.AddrPortFrom(addr, uint16(port)).String()
	results := make(chan error, tcpTries)
	try := func() {
		results <- ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	tick := time.NewTicker(ProbeTimeout / tcpTries)
	defer tick.Stop()
	go try()
	for started, pending := 1, 1; pending > 0; {
		select {
		case err := <-results:
			pending--
			var ne net.Error
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			default:
				return false, err
			}
		case <-tick.C:
			if started < tcpTries && ctx.Err() == nil {
				started++
				pending++
				go try()
			}
		}
	}
	return false, nil
}

// probeUDP sends from a source port of server's (udpSourcePort), or one the
// kernel chooses when there are no listeners to count them.
func probeUDP(addr netip.Addr, port int, server *Listeners) (bool, error) {
	c, err := dialUDP(netip.AddrPortFrom(addr, uint16(port)), server)
	if err != nil {
		return false, err
	}
	defer c.Close()
	want := rand.Text()[:8]
	buf := make([]byte, 64)
	deadline := time.Now().Add(ProbeTimeout)
	for time.Now().Before(deadline) { // a datagram may be lost: send again
		if _, err := c.Write([]byte(want)); err != nil {
			return dropped(err)
		}
		c.SetReadDeadline(time.Now().Add(min(ProbeTimeout/4, time.Until(deadline))))
		n, err := c.Read(buf)
		var ne net.Error
		switch {
		case err == nil && string(buf[:n]) == want:
			return true, nil
		case err != nil && !(errors.As(err, &ne) && ne.Timeout()):
			return false, err
		}
	}
	return false, nil
}

func dialUDP(to netip.AddrPort, server *Listeners) (*net.UDPConn, error) {
	raddr := net.UDPAddrFromAddrPort(to)
	if server == nil {
		return net.DialUDP("udp", nil, raddr)
	}
	for range 10 { // a port in use in the namespace (a listener of its own): the next
		c, err := net.DialUDP("udp", &net.UDPAddr{Port: server.udpSourcePort()}, raddr)
		if !errors.Is(err, unix.EADDRINUSE) {
			return c, err
		}
	}
	return nil, fmt.Errorf("udp to %s: 10 source ports in a row in use", to)
}

func probeSCTP(addr netip.Addr, port int, server *Listeners) (bool, error) {
	if server == nil {
		return false, errors.New("an SCTP probe needs the server's listeners")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_SCTP)
	if err != nil {
		return false, fmt.Errorf("raw SCTP socket: %w", err)
	}
	defer unix.Close(fd)
	var tagBytes [4]byte
	rand.Read(tagBytes[:])
	tag := binary.BigEndian.Uint32(tagBytes[:]) | 1
	to := &unix.SockaddrInet4{Addr: addr.As4()}
	pkt := sctpInit(uint16(40000+tag%20000), uint16(port), tag)
	deadline := time.Now().Add(ProbeTimeout)
	for time.Now().Before(deadline) { // a packet may be lost: send again, as SCTP would
		if err := unix.Sendto(fd, pkt, 0, to); err != nil {
			return dropped(fmt.Errorf("send SCTP INIT: %w", err))
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(ProbeTimeout/4, time.Until(deadline)))
		seen := server.waitInit(ctx, tag)
		cancel()
		if seen {
			return true, nil
		}
	}
	return false, nil
}

// dropped: a datagram the client's own output hook drops fails its send
// with EPERM (TCP retransmits its SYN instead, and times out): closed.
func dropped(err error) (bool, error) {
	if errors.Is(err, unix.EPERM) {
		return false, nil
	}
	return false, err
}

// sctpInit is an SCTP packet holding one INIT chunk (RFC 9260 3.3.2) whose
// initiate tag identifies the probe.
func sctpInit(src, dst uint16, tag uint32) []byte {
	b := make([]byte, 12+20)
	binary.BigEndian.PutUint16(b[0:], src)
	binary.BigEndian.PutUint16(b[2:], dst)
	// verification tag 0 (an INIT's), checksum below
	b[12] = 1                                 // INIT
	binary.BigEndian.PutUint16(b[14:], 20)    // chunk length
	binary.BigEndian.PutUint32(b[16:], tag)   // initiate tag
	binary.BigEndian.PutUint32(b[20:], 65535) // a_rwnd
	binary.BigEndian.PutUint16(b[24:], 1)     // outbound streams
	binary.BigEndian.PutUint16(b[26:], 1)     // inbound streams
	binary.BigEndian.PutUint32(b[28:], tag)   // initial TSN
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// initTag returns the initiate tag of an IPv4 packet holding an SCTP INIT.
func initTag(pkt []byte) (uint32, bool) {
	if len(pkt) < 20 {
		return 0, false
	}
	ihl := int(pkt[0]&0x0f) * 4
	s := pkt[min(ihl, len(pkt)):]
	if len(s) < 20 || s[12] != 1 {
		return 0, false
	}
	return binary.BigEndian.Uint32(s[16:]), true
}
