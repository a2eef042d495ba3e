package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// LockPath is the lock every test package holds while its netclass-dra daemons serve the
// test bed's nodes.
const LockPath = "/run/lock/netclass-dra-testbed.lock"

// readyLine is what netclass-dra logs once the kubelet registered it and NRI connected.
const readyLine = "netclass-dra ready"

// Lock takes the node's netclass-dra lock, waiting up to timeout for another
// test process to release it. The returned function releases it.
func Lock(timeout time.Duration) (func(), error) {
	if err := os.MkdirAll("/run/lock", 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", LockPath, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s (another test process runs netclass-dra on this node): %w", LockPath, err)
		}
		time.Sleep(200 * time.Millisecond) // polling a lock another process holds: no event to wait on
	}
}

// DRA is a netclass-dra subprocess.
type DRA struct {
	Bin        string
	Kubeconfig string
	Node       string
	// On is the test bed node it runs on: in that node's network and mount namespaces,
	// where the defaults of its flags (kubelet dir, NRI socket, CNI dirs) are the node's. The
	// zero Node is this machine's own namespaces (as node 1).
	On      bed.Node
	CNIDirs []string
	// StateDir survives restarts of the process (crash tests rely on it).
	StateDir string
	// LogPath collects the output of every run.
	LogPath string
	Extra   []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan struct{}
	// health is the running daemon's health address: a free loopback port
	// of its node's network namespace, picked at each launch (Agent reads
	// /debug/attachments there).
	health string
}

// Args are the command line of the daemon, its health address as picked
// for this run (test/deploy checks the probes themselves).
func (d *DRA) Args() []string {
	return append([]string{
		"--kubeconfig=" + d.Kubeconfig, "--node-name=" + d.Node, "--health-address=" + d.health,
		"--kubelet-dir=/var/lib/kubelet", "--nri-socket=/var/run/nri/nri.sock",
		"--cni-bin-dir=" + strings.Join(d.CNIDirs, ","), "--state-dir=" + d.StateDir, "-v=2",
	}, d.Extra...)
}

// Launch runs the daemon without waiting for it; it returns the log offset
// the run starts at.
func (d *DRA) Launch() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.launchLocked()
}

func (d *DRA) launchLocked() (int64, error) {
	if d.cmd != nil {
		return 0, errors.New("netclass-dra already runs")
	}
	log, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	offset, _ := log.Seek(0, 2)
	if d.health, err = loopbackPort(d.On); err != nil {
		return 0, err
	}
	cmd := d.On.Command(d.Bin, d.Args()...)
	cmd.Stdout, cmd.Stderr = log, log
	exited, err := startTied(cmd)
	if err != nil {
		return 0, fmt.Errorf("start netclass-dra: %w", err)
	}
	d.cmd, d.exited = cmd, exited
	return offset, nil
}

// Start runs the daemon and waits until it is ready (kubelet registration
// and NRI connection), at most timeout.
func (d *DRA) Start(timeout time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	offset, err := d.launchLocked()
	if err != nil {
		return err
	}
	exited := d.exited
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if d.logHas(offset, readyLine) {
			return nil
		}
		select {
		case <-exited:
			d.cmd = nil
			return fmt.Errorf("netclass-dra exited during start: %s", d.tailLocked(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("netclass-dra not ready after %v: %s", timeout, d.tailLocked(30))
}

// PID is the process ID of the running daemon (0 when stopped).
func (d *DRA) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Exited returns a channel closed when the running daemon exits by itself
// (nil when it is not running).
func (d *DRA) Exited() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	return d.exited
}

// Kill sends SIGKILL to the daemon (by its PID) and waits for it to die.
func (d *DRA) Kill() error { return d.signal(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits up to 30 s, then SIGKILL.
func (d *DRA) Stop() error {
	if err := d.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		return errors.Join(err, d.Kill())
	}
	return nil
}

func (d *DRA) signal(sig syscall.Signal, wait time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	select {
	case <-d.exited: // it died by itself, or with its node (bed.RemoveNode)
		d.cmd = nil
		return nil
	default:
	}
	if err := d.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal netclass-dra (pid %d): %w", d.cmd.Process.Pid, err)
	}
	select {
	case <-d.exited:
		d.cmd = nil
		return nil
	case <-time.After(wait):
		return fmt.Errorf("netclass-dra (pid %d) still runs %v after %v", d.cmd.Process.Pid, wait, sig)
	}
}

// Memory returns the daemon's resident set size and its peak, in bytes.
func (d *DRA) Memory() (rss, peak int64, err error) {
	pid := d.PID()
	if pid == 0 {
		return 0, 0, errors.New("netclass-dra is not running")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			peak = kb * 1024
		}
	}
	return rss, peak, sc.Err()
}

// Tail returns the last n lines of the daemon's log.
func (d *DRA) Tail(n int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tailLocked(n)
}

func (d *DRA) tailLocked(n int) string {
	raw, err := os.ReadFile(d.LogPath)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", d.LogPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\n" + strings.Join(lines, "\n")
}

func (d *DRA) logHas(offset int64, s string) bool {
	raw, err := os.ReadFile(d.LogPath)
	if err != nil || int64(len(raw)) < offset {
		return false
	}
	return bytes.Contains(raw[offset:], []byte(s))
}

// Logs returns everything the daemon logged.
func (d *DRA) Logs() string {
	raw, _ := os.ReadFile(d.LogPath)
	return string(raw)
}

// Failf reports a failure with the end of the daemon's log attached.
func (d *DRA) Failf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s\nnetclass-dra log:%s", fmt.Sprintf(format, args...), d.Tail(40))
}

// RestartWith stops the daemon and starts it again with extra flags (none:
// the defaults), failing the test if either step fails.
func (d *DRA) RestartWith(t testing.TB, extra ...string) {
	t.Helper()
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	d.Extra = extra
	if err := d.Start(time.Minute); err != nil {
		t.Fatal(err)
	}
}
