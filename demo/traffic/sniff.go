package traffic

import (
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
	ECN      uint8 // the low two bits of the IPv4 TOS / IPv6 traffic class
	// VLAN is the frame's 802.1Q tag, nil for an untagged frame.
	VLAN *VLANTag
	// Inner is the packet a VXLAN datagram (UDP, VXLAN header with a
	// valid VNI) carries, nil for any other.
	Inner *Packet
	// VNI is the VXLAN network identifier when Inner is set.
	VNI uint32
}

// VLANTag is an 802.1Q tag: the VLAN ID and the 802.1p priority (PCP).
type VLANTag struct {
	ID  uint16
	PCP uint8
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
		// The kernel takes a received frame's 802.1Q tag out of the
		// data (skb_vlan_untag): auxdata hands it back.
		err = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1)
		if err == nil {
			err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index})
		}
		if err != nil {
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
	buf, oob := make([]byte, 65536), make([]byte, 256)
	for {
		n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return // closed
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if p, ok := parseFrame(buf[:n], auxVLAN(oob[:oobn])); ok {
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
