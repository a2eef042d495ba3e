//go:build vmtest

package guest_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/test/rawframe"
)

// ping sends one ICMP echo request with size bytes of payload from inside n to dst and waits up
// to timeout for the matching reply.
func ping(n ns.NetNS, dst net.IP, size int, timeout time.Duration) error {
	return n.Do(func(ns.NetNS) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("open raw ICMP socket: %w", err)
		}
		defer unix.Close(fd)
		id, seq := uint16(rand.Uint32()), uint16(1)
		to := &unix.SockaddrInet4{Addr: [4]byte(dst.To4())}
		if err := unix.Sendto(fd, echoRequest(id, seq, size), 0, to); err != nil {
			return fmt.Errorf("send echo request to %s: %w", dst, err)
		}
		return awaitReply(fd, id, seq, time.Now().Add(timeout))
	})
}

func awaitReply(fd int, id, seq uint16, deadline time.Time) error {
	buf := make([]byte, 65536)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("no echo reply before the deadline")
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("set receive timeout: %w", err)
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("receive echo reply: %w", err)
		}
		if isReply(buf[:n], id, seq) {
			return nil
		}
	}
}

// isReply tells whether pkt (an IPv4 packet, as raw sockets deliver it) is our echo reply.
func isReply(pkt []byte, id, seq uint16) bool {
	if len(pkt) < 20 {
		return false
	}
	icmp := pkt[int(pkt[0]&0x0f)*4:]
	return len(icmp) >= 8 && icmp[0] == 0 && icmp[1] == 0 &&
		binary.BigEndian.Uint16(icmp[4:]) == id && binary.BigEndian.Uint16(icmp[6:]) == seq
}

func echoRequest(id, seq uint16, size int) []byte {
	msg := make([]byte, 8+size)
	msg[0] = 8 // echo request
	binary.BigEndian.PutUint16(msg[4:], id)
	binary.BigEndian.PutUint16(msg[6:], seq)
	for i := range size {
		msg[8+i] = byte(i)
	}
	binary.BigEndian.PutUint16(msg[2:], rawframe.Checksum(msg))
	return msg
}
