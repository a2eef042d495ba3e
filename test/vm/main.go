package vm

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// exitHarnessFailure is vmexec's exit status when the harness itself failed.
const exitHarnessFailure = 125

// Main is vmexec on the host: args are the program and its arguments, run in the guest with the
// caller's working directory and environment. It returns the program's exit status.
func Main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: vmexec PROGRAM [ARG...]  (as go test -exec vmexec)")
		return 2
	}
	code, err := runFromEnv(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return exitHarnessFailure
	}
	return code
}

func runFromEnv(args []string) (int, error) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return -1, err
	}
	dir, err := os.Getwd()
	if err != nil {
		return -1, fmt.Errorf("get working directory: %w", err)
	}
	// go test sends SIGQUIT to a runner that outlives its timeout: kill qemu before leaving.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP)
	defer stop()
	return Run(ctx, cfg, Command{Path: args[0], Args: args[1:], Dir: dir, Env: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr})
}
