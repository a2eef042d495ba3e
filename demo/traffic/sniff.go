package traffic

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Packet is what the sniffer records of one IP packet.
type Packet struct {
	Src, Dst netip.Addr
	Proto    uint8
	DstPort  uint16
	DSCP     uint8
}

// Sniffer captures the IP packets an interface receives, with AF_PACKET.
type Sniffer struct {
	fd   int
	mu   sync.Mutex
	pkts []Packet
	done chan struct{}
}

// Sniff starts capturing on ifname inside ns. Close stops it.
func Sniff(ns *NS, ifname string) (*Sniffer, error) {
	s := &Sniffer{done: make(chan struct{})}
	err := ns.Run(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := htons(unix.ETH_P_ALL)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(proto))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		s.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sniff %s in %s: %w", ifname, ns.Name, err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	go s.loop()
	return s, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (s *Sniffer) loop() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for {
		n, from, err := unix.Recvfrom(s.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return // closed
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if p, ok := parseFrame(buf[:n]); ok {
			s.mu.Lock()
			s.pkts = append(s.pkts, p)
			s.mu.Unlock()
		}
	}
}

// Packets returns what was captured so far.
func (s *Sniffer) Packets() []Packet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Packet(nil), s.pkts...)
}

// WaitFor polls until match has selected at least n packets or timeout
// passes, and returns the matching packets.
func (s *Sniffer) WaitFor(match func(Packet) bool, n int, timeout time.Duration) []Packet {
	deadline := time.Now().Add(timeout)
	for {
		var got []Packet
		for _, p := range s.Packets() {
			if match(p) {
				got = append(got, p)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// Close stops the capture.
func (s *Sniffer) Close() {
	unix.Shutdown(s.fd, unix.SHUT_RDWR)
	unix.Close(s.fd)
	<-s.done
}

// parseFrame decodes Ethernet + IPv4/IPv6 + the destination port of
// TCP/UDP/SCTP.
func parseFrame(b []byte) (Packet, bool) {
	if len(b) < 14 {
		return Packet{}, false
	}
	et, ip := binary.BigEndian.Uint16(b[12:14]), b[14:]
	switch et {
	case unix.ETH_P_IP:
		if len(ip) < 20 {
			return Packet{}, false
		}
		ihl := int(ip[0]&0x0f) * 4
		p := Packet{DSCP: ip[1] >> 2, Proto: ip[9],
			Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20]))}
		return withPort(p, ip[min(ihl, len(ip)):]), true
	case unix.ETH_P_IPV6:
		if len(ip) < 40 {
			return Packet{}, false
		}
		tc := (ip[0]&0x0f)<<4 | ip[1]>>4
		p := Packet{DSCP: tc >> 2, Proto: ip[6],
			Src: netip.AddrFrom16([16]byte(ip[8:24])), Dst: netip.AddrFrom16([16]byte(ip[24:40]))}
		return withPort(p, ip[40:]), true
	}
	return Packet{}, false
}

func withPort(p Packet, l4 []byte) Packet {
	if (p.Proto == 6 || p.Proto == 17 || p.Proto == 132) && len(l4) >= 4 {
		p.DstPort = binary.BigEndian.Uint16(l4[2:4])
	}
	return p
}
