package bwshare

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/netclass-dev/netclass/test/nstest"
)

// sendWithPriority sends count UDP datagrams of 1000 bytes from n to dst
// with the socket's SO_PRIORITY set to prio.
func sendWithPriority(n *nstest.NS, dst string, prio uint32, count int) error {
	return n.Run(func() error {
		c, err := net.Dial("udp4", dst+":9")
		if err != nil {
			return err
		}
		defer c.Close()
		raw, err := c.(*net.UDPConn).SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PRIORITY, int(prio))
		}); err != nil || serr != nil {
			return fmt.Errorf("SO_PRIORITY %x: %v %v", prio, err, serr)
		}
		buf := make([]byte, 1000)
		for range count {
			if _, err := c.Write(buf); err != nil && !errors.Is(err, syscall.ECONNREFUSED) { // the far end's port unreachable
				return err
			}
		}
		return nil
	})
}
