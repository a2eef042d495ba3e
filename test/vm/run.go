package vm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Command is a program to run in the guest.
type Command struct {
	Path   string   // the program; resolved against Dir and $PATH on the host
	Args   []string // its arguments
	Dir    string   // working directory, absolute
	Env    []string // environment; NETCLASS_VM and NETCLASS_NETDEVSIM_KO are added
	Stdout io.Writer
	Stderr io.Writer
}

// Run boots a guest, runs cmd in it and returns cmd's exit status. The error reports a
// failure of the harness itself (boot, timeout, lost output), never a non-zero exit status.
func Run(ctx context.Context, cfg Config, cmd Command) (int, error) {
	sp, err := newSpec(cfg, cmd)
	if err != nil {
		return -1, err
	}
	s, err := openSession(cfg, cmd.Stdout, cmd.Stderr)
	if err != nil {
		return -1, err
	}
	code, err := s.run(ctx, cfg, sp)
	if err != nil || code != 0 || cfg.KeepLog {
		s.keepLog = true
	}
	s.close()
	if err != nil {
		return -1, fmt.Errorf("%w (kernel console log: %s)", err, s.consoleLog)
	}
	if code != 0 {
		fmt.Fprintf(cmd.Stderr, "vmexec: %s exited with status %d in the VM (kernel console log: %s)\n",
			sp.Path, code, s.consoleLog)
	}
	return code, nil
}

func newSpec(cfg Config, cmd Command) (spec, error) {
	path, err := resolveProgram(cmd.Path, cmd.Dir)
	if err != nil {
		return spec{}, err
	}
	binds := []string{filepath.Dir(path), cmd.Dir}
	if root := moduleRoot(cmd.Dir); root != "" {
		binds = append(binds, root) // build outputs and caches a test names (e.g. NETCLASS_CNI_PATH)
	}
	sp := spec{Path: path, Args: cmd.Args, Dir: cmd.Dir, Binds: binds}
	sp.Env = append(append([]string{}, cmd.Env...), "NETCLASS_VM=1", "NETCLASS_NETDEVSIM_KO="+cfg.NetdevsimKO())
	for i, d := range sharedDirs(cmd.Args, sp.Env, cmd.Dir) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return spec{}, fmt.Errorf("create shared directory %s: %w", d, err)
		}
		sp.Shares = append(sp.Shares, share{Tag: fmt.Sprintf("share%d", i), Path: d})
	}
	return sp, nil
}

func resolveProgram(p, dir string) (string, error) {
	if !strings.Contains(p, "/") {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("find program %s: %w", p, err)
		}
		p = found
	}
	p = absIn(dir, p)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("program %s: %w", p, err)
	}
	return p, nil
}

// session is one boot: its private directory (FIFOs, control socket) and console log.
type session struct {
	dir            string
	consoleLog     string
	controlSocket  string
	listener       *net.UnixListener
	stdout, stderr *stream
	keepLog        bool
}

func openSession(cfg Config, stdout, stderr io.Writer) (*session, error) {
	if err := os.MkdirAll(cfg.logDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory %s: %w", cfg.logDir(), err)
	}
	dir, err := os.MkdirTemp("", "netclass-vm-")
	if err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	s := &session{dir: dir, controlSocket: filepath.Join(dir, "control.sock")}
	if err := s.open(cfg, stdout, stderr); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// logAge is how long console logs of failed runs are kept.
const logAge = 7 * 24 * time.Hour

func (s *session) open(cfg Config, stdout, stderr io.Writer) error {
	pruneLogs(cfg.logDir())
	log, err := os.CreateTemp(cfg.logDir(), "console-*.log")
	if err != nil {
		return fmt.Errorf("create console log in %s: %w", cfg.logDir(), err)
	}
	s.consoleLog = log.Name()
	log.Close()
	if s.listener, err = net.ListenUnix("unix", &net.UnixAddr{Name: s.controlSocket, Net: "unix"}); err != nil {
		return fmt.Errorf("listen on control socket %s: %w", s.controlSocket, err)
	}
	if s.stdout, err = openStream(s.dir, "stdout", stdout); err != nil {
		return err
	}
	s.stderr, err = openStream(s.dir, "stderr", stderr)
	return err
}

// pruneLogs removes console logs older than logAge; a failure only leaves them there.
func pruneLogs(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, "console-*.log"))
	for _, f := range old {
		if st, err := os.Stat(f); err == nil && time.Since(st.ModTime()) > logAge {
			os.Remove(f)
		}
	}
}

// close releases everything; the streams must have been finished or never started.
func (s *session) close() {
	for _, st := range []*stream{s.stdout, s.stderr} {
		if st != nil {
			_ = st.finish()
		}
	}
	if s.listener != nil {
		s.listener.Close()
	}
	os.RemoveAll(s.dir)
	if !s.keepLog && s.consoleLog != "" {
		os.Remove(s.consoleLog)
	}
}

// run starts qemu, talks to the guest and waits for qemu to exit.
func (s *session) run(ctx context.Context, cfg Config, sp spec) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var qemuOut bytes.Buffer
	q := exec.Command(cfg.QEMU, qemuArgs(cfg, s, sp.Shares)...)
	q.Stdout, q.Stderr = &qemuOut, &qemuOut
	q.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := q.Start(); err != nil {
		return -1, fmt.Errorf("start %s: %w", cfg.QEMU, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- q.Wait() }()
	convCtx, stopConv := context.WithCancel(ctx)
	talked := make(chan conversation, 1)
	go func() { talked <- s.converse(convCtx, sp) }()

	killed, qerr := waitQEMU(ctx, q, exited)
	stopConv()
	conv := <-talked
	outErr := errors.Join(s.finishStreams()...)
	if killed {
		return -1, timeoutError(ctx, cfg, q.Process.Pid)
	}
	return conv.verify(qerr, outErr, qemuOut.String())
}

// waitQEMU waits for qemu to exit; when ctx ends first it kills that qemu, by its PID.
func waitQEMU(ctx context.Context, q *exec.Cmd, exited <-chan error) (killed bool, err error) {
	select {
	case err := <-exited:
		return false, err
	case <-ctx.Done():
		_ = q.Process.Kill()
		return true, <-exited
	}
}

func timeoutError(ctx context.Context, cfg Config, pid int) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the guest did not finish within %s (NETCLASS_VM_TIMEOUT): killed qemu pid %d", cfg.Timeout, pid)
	}
	return fmt.Errorf("interrupted: killed qemu pid %d: %w", pid, context.Cause(ctx))
}

func (s *session) finishStreams() []error {
	errs := []error{s.stdout.finish(), s.stderr.finish()}
	s.stdout, s.stderr = nil, nil
	return errs
}

// conversation is what came back over the control port.
type conversation struct {
	res      result
	reported bool  // the guest sent a result
	err      error // the conversation failed before the guest was acknowledged
}

// converse sends the spec, reads the result, waits until all the output it counts has been
// read and lets the guest power off. ctx ends when qemu exits.
func (s *session) converse(ctx context.Context, sp spec) conversation {
	stop := context.AfterFunc(ctx, func() { s.listener.Close() })
	conn, err := s.listener.AcceptUnix()
	stop()
	if err != nil {
		return conversation{err: fmt.Errorf("accept qemu on %s: %w", s.controlSocket, err)}
	}
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(sp); err != nil {
		return conversation{err: fmt.Errorf("send spec to the guest: %w", err)}
	}
	var c conversation
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return conversation{err: fmt.Errorf("read the guest's result: %w", err)}
	}
	if err := json.Unmarshal(line, &c.res); err != nil {
		return conversation{err: fmt.Errorf("decode the guest's result %q: %w", line, err)}
	}
	c.reported = true
	if err := s.waitOutput(ctx, c.res); err != nil {
		c.err = err
		return c
	}
	if _, err := io.WriteString(conn, ackLine); err != nil {
		c.err = fmt.Errorf("acknowledge the guest's result: %w", err)
	}
	return c
}

func (s *session) waitOutput(ctx context.Context, res result) error {
	if err := s.stdout.bytes.waitFor(ctx, res.Stdout); err != nil {
		return fmt.Errorf("guest stdout: %w", err)
	}
	if err := s.stderr.bytes.waitFor(ctx, res.Stderr); err != nil {
		return fmt.Errorf("guest stderr: %w", err)
	}
	return nil
}

// verify turns what happened into the exit status or the harness's error.
func (c conversation) verify(qerr, outErr error, qemuOut string) (int, error) {
	detail := ""
	if qemuOut = strings.TrimSpace(qemuOut); qemuOut != "" {
		detail = "; qemu said: " + qemuOut
	}
	switch {
	case !c.reported:
		return -1, fmt.Errorf("the guest stopped without reporting a result (%s): %w%s", qemuStatus(qerr), c.err, detail)
	case c.res.Error != "":
		return -1, fmt.Errorf("guest agent: %s", c.res.Error)
	case c.err != nil:
		return -1, fmt.Errorf("collect the guest's output: %w%s", c.err, detail)
	case outErr != nil:
		return -1, outErr
	case qerr != nil:
		return -1, fmt.Errorf("qemu: %w%s", qerr, detail)
	}
	return c.res.ExitCode, nil
}

func qemuStatus(err error) string {
	if err == nil {
		return "qemu exited normally: the guest powered off or panicked"
	}
	return "qemu: " + err.Error()
}

// moduleRoot returns the nearest directory at or above dir holding a go.mod,
// or "" when there is none. A checkout under /tmp would otherwise be hidden
// from the guest by its fresh /tmp, except for the working directory.
func moduleRoot(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
