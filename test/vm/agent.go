package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// portWait bounds how long the agent waits for the virtio-serial ports to show up.
const portWait = 30 * time.Second

// GuestInit is the guest's init once the initramfs has switched to the overlay root: it runs
// the host's spec, reports the result and powers the guest off. It never returns.
func GuestInit() {
	if err := serve(); err != nil {
		fmt.Fprintf(os.Stderr, "netclass-vm agent: %v\n", err)
	}
	powerOff()
}

func serve() error {
	for _, m := range baseMounts() {
		if err := m.mount(); err != nil {
			return err
		}
	}
	ctl, err := openPort(controlPort)
	if err != nil {
		return err
	}
	defer ctl.Close()
	in := bufio.NewReader(ctl)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read spec from port %s: %w", controlPort, err)
	}
	var sp spec
	if err := json.Unmarshal(line, &sp); err != nil {
		return fmt.Errorf("decode spec %q: %w", line, err)
	}
	if err := json.NewEncoder(ctl).Encode(execute(sp)); err != nil {
		return fmt.Errorf("send result on port %s: %w", controlPort, err)
	}
	if _, err := in.ReadString('\n'); err != nil {
		return fmt.Errorf("wait for the host's acknowledgement: %w", err)
	}
	return nil
}

// execute prepares the guest for sp and runs it.
func execute(sp spec) result {
	if err := prepare(sp); err != nil {
		return result{Error: err.Error()}
	}
	stdout, err := openPort(stdoutPort)
	if err != nil {
		return result{Error: err.Error()}
	}
	defer stdout.Close()
	stderr, err := openPort(stderrPort)
	if err != nil {
		return result{Error: err.Error()}
	}
	defer stderr.Close()
	return runProgram(sp, &countingWriter{w: stdout}, &countingWriter{w: stderr})
}

func runProgram(sp spec, stdout, stderr *countingWriter) result {
	cmd := exec.Command(sp.Path, sp.Args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = sp.Dir, sp.Env, stdout, stderr
	// A background process left holding stdout must not hold the guest up for ever.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	unix.Sync()
	if cmd.ProcessState == nil {
		return result{Error: fmt.Sprintf("start %s: %v", sp.Path, err)}
	}
	res := result{ExitCode: exitStatus(cmd.ProcessState), Stdout: stdout.n.Load(), Stderr: stderr.n.Load()}
	if errors.Is(err, exec.ErrWaitDelay) {
		fmt.Fprintf(os.Stderr, "netclass-vm agent: %s left processes holding its output\n", sp.Path)
	}
	return res
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// countingWriter counts what reaches w (atomically: after WaitDelay a copy may still run).
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// openPort opens the virtio-serial port with the given name, waiting for the kernel to announce
// it (ports and their names arrive asynchronously after virtio_console loads).
func openPort(name string) (*os.File, error) {
	deadline := time.Now().Add(portWait)
	for {
		dev, err := findPort(name)
		if err == nil {
			f, err := os.OpenFile(dev, os.O_RDWR, 0)
			if err != nil {
				return nil, fmt.Errorf("open port %s (%s): %w", name, dev, err)
			}
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("port %s: %w", name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func findPort(name string) (string, error) {
	entries, err := filepath.Glob("/sys/class/virtio-ports/*/name")
	if err != nil {
		return "", fmt.Errorf("list virtio ports: %w", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err == nil && strings.TrimSpace(string(b)) == name {
			dev := "/dev/" + filepath.Base(filepath.Dir(e))
			if _, err := os.Stat(dev); err == nil {
				return dev, nil
			}
		}
	}
	return "", fmt.Errorf("no virtio port named %s among %d", name, len(entries))
}

func powerOff() {
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintf(os.Stderr, "netclass-vm agent: power off: %v\n", err)
	}
	select {} // pid 1 must not exit: that panics the kernel
}
