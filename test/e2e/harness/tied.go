package harness

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startTied starts cmd so that it cannot outlive the test process: the kernel
// sends it SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG,
// kept across nsenter's exec), so that thread stays locked to the goroutine
// that waits for cmd until cmd has exited. A test that panics, times out or
// is killed leaves no netclass-dra behind. The returned channel is closed
// once cmd has exited and been waited for.
func startTied(cmd *exec.Cmd) (<-chan struct{}, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		// Never unlocked: the thread ends with this goroutine, after cmd.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
