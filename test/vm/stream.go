package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// meter counts bytes and lets a caller wait until a count is reached.
type meter struct {
	mu      sync.Mutex
	n       int64
	changed chan struct{}
}

func newMeter() *meter { return &meter{changed: make(chan struct{})} }

func (m *meter) add(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n += int64(n)
	close(m.changed)
	m.changed = make(chan struct{})
}

// waitFor returns once at least want bytes were counted, or when ctx ends.
func (m *meter) waitFor(ctx context.Context, want int64) error {
	for {
		m.mu.Lock()
		n, ch := m.n, m.changed
		m.mu.Unlock()
		if n >= want {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("got %d of %d bytes: %w", n, want, ctx.Err())
		}
	}
}

// stream carries one guest output from a FIFO that qemu writes to the caller's writer.
// It holds a write end of its own so the FIFO never reads as ended before qemu opens it;
// finish drops it once qemu has exited, and the copy stops at the end of what qemu wrote.
type stream struct {
	name  string
	fifo  string
	r, w  *os.File
	bytes *meter
	done  chan error
}

func openStream(dir, name string, dst io.Writer) (*stream, error) {
	s := &stream{name: name, fifo: filepath.Join(dir, name), bytes: newMeter(), done: make(chan error, 1)}
	if err := unix.Mkfifo(s.fifo, 0o600); err != nil {
		return nil, fmt.Errorf("create fifo %s: %w", s.fifo, err)
	}
	var err error
	if s.r, err = os.OpenFile(s.fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		return nil, fmt.Errorf("open fifo %s for reading: %w", s.fifo, err)
	}
	if s.w, err = os.OpenFile(s.fifo, os.O_WRONLY, 0); err != nil {
		s.r.Close()
		return nil, fmt.Errorf("open fifo %s for writing: %w", s.fifo, err)
	}
	growPipe(s.r)
	go func() { s.done <- s.copy(dst) }()
	return s, nil
}

// growPipe enlarges the FIFO's buffer so qemu rarely waits on the reader; the default works too.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}

// copy reads until every writer is gone; after a failed write it goes on reading, so the guest
// is never blocked, and reports the first write error.
func (s *stream) copy(dst io.Writer) error {
	buf := make([]byte, 64<<10)
	var werr error
	for {
		n, err := s.r.Read(buf)
		if n > 0 {
			if werr == nil {
				_, werr = dst.Write(buf[:n])
			}
			s.bytes.add(n)
		}
		if errors.Is(err, io.EOF) {
			if werr != nil {
				return fmt.Errorf("write guest %s: %w", s.name, werr)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read guest %s from %s: %w", s.name, s.fifo, err)
		}
	}
}

// finish waits for the copy to end; call it once qemu has exited.
func (s *stream) finish() error {
	s.w.Close()
	err := <-s.done
	s.r.Close()
	return err
}
