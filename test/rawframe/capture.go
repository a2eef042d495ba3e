package rawframe

import (
	"bytes"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Capture receives every frame an interface receives, whatever becomes of
// it afterwards (a frame a policy drops at the IP input still reaches it):
// what a tcpdump on the interface would see.
type Capture struct {
	fd int
}

// Listen starts capturing on the interface of the calling thread's network
// namespace; frames that arrive before Listen are not seen.
func Listen(ifname string) (*Capture, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind to %s: %w", ifname, err)
	}
	return &Capture{fd: fd}, nil
}

// Close stops the capture.
func (c *Capture) Close() error { return unix.Close(c.fd) }

// Wait reports whether a received frame contains marker before the timeout.
func (c *Capture) Wait(marker []byte, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 65536)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return false, err
		}
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return false, fmt.Errorf("capture: %w", err)
		case bytes.Contains(buf[:n], marker):
			return true, nil
		}
	}
}
