package traffic

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// TCPRate streams from client to server:port for d and returns the rate the
// server received, in bits per second.
func TCPRate(client, server *NS, addr netip.Addr, port uint16, d time.Duration) (float64, error) {
	ap := netip.AddrPortFrom(addr, port)
	var ln net.Listener
	if err := server.Run(func() (err error) { ln, err = net.Listen("tcp", ap.String()); return err }); err != nil {
		return 0, fmt.Errorf("listen on %s in %s: %w", ap, server.Name, err)
	}
	defer ln.Close()
	recv := receiver{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		recv.drain(c)
	}()
	var conn net.Conn
	if err := client.Run(func() (err error) { conn, err = net.DialTimeout("tcp", ap.String(), 5*time.Second); return err }); err != nil {
		return 0, fmt.Errorf("connect to %s from %s: %w", ap, client.Name, err)
	}
	buf := make([]byte, 64<<10)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		conn.SetWriteDeadline(end)
		if _, err := conn.Write(buf); err != nil && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
			conn.Close()
			return 0, err
		}
	}
	conn.Close()
	wg.Wait()
	return recv.bps()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// UDPResult is what a UDP receiver measured.
type UDPResult struct {
	// SteadyBps is the rate received after the first Warmup of the flow,
	// once any bucket a meter starts with is drained.
	SteadyBps float64
	// TotalBytes is everything received.
	TotalBytes int64
}

// UDPRate sends datagrams of size bytes from client to server:port, paced
// at offeredBps for d, and returns what the server received.
func UDPRate(client, server *NS, addr netip.Addr, port uint16, size int, offeredBps float64, d, warmup time.Duration) (UDPResult, error) {
	ap := netip.AddrPortFrom(addr, port)
	var pc net.PacketConn
	if err := server.Run(func() (err error) { pc, err = net.ListenPacket("udp", ap.String()); return err }); err != nil {
		return UDPResult{}, fmt.Errorf("listen on %s in %s: %w", ap, server.Name, err)
	}
	recv := receiver{warmup: warmup}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); recv.drainPackets(pc) }()
	var conn net.Conn
	if err := client.Run(func() (err error) { conn, err = net.Dial("udp", ap.String()); return err }); err != nil {
		pc.Close()
		return UDPResult{}, err
	}
	pace(conn, size, offeredBps, d)
	conn.Close()
	// Let the last datagrams in flight arrive, then stop the receiver.
	pc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	wg.Wait()
	pc.Close()
	bps, err := recv.bps()
	return UDPResult{SteadyBps: bps, TotalBytes: recv.total}, err
}

// pace writes datagrams at the offered rate, in 1 ms batches.
func pace(conn net.Conn, size int, bps float64, d time.Duration) {
	buf := make([]byte, size)
	start := time.Now()
	sent := 0.0
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for now := range tick.C {
		el := now.Sub(start)
		if el > d {
			return
		}
		for sent*8 < bps*el.Seconds() {
			conn.Write(buf) // a full socket buffer drops, which is what a flood does
			sent += float64(size)
		}
	}
}

// receiver counts bytes from warmup after the first arrival to the last.
type receiver struct {
	warmup      time.Duration
	mu          sync.Mutex
	total       int64 // every byte
	bytes       int64 // bytes after the warmup
	start       time.Time
	first, last time.Time
}

func (r *receiver) add(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.total += int64(n)
	if r.start.IsZero() {
		r.start = now
	}
	if now.Sub(r.start) < r.warmup {
		return
	}
	if r.first.IsZero() {
		r.first = now
		return // the first counted arrival opens the window
	}
	r.last = now
	r.bytes += int64(n)
}

func (r *receiver) drain(c io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		r.add(n)
		if err != nil {
			return
		}
	}
}

func (r *receiver) drainPackets(pc net.PacketConn) {
	buf := make([]byte, 65536)
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		r.add(n)
	}
}

func (r *receiver) bps() (float64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el := r.last.Sub(r.first).Seconds()
	if r.bytes == 0 || el <= 0 {
		return 0, fmt.Errorf("received %d bytes over %.3fs: no measurable flow", r.bytes, el)
	}
	return float64(r.bytes) * 8 / el, nil
}
