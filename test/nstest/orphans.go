package nstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	kernelnetns "github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// uniqueName is a new namespace's name: Prefix, the test process's PID,
// and random hex, so that a namespace whose process is gone can be told
// from one a running test still uses (see sweepOrphans).
func uniqueName(pid int) string { return fmt.Sprintf("%s%d-%s", Prefix, pid, randomHex(5)) }

// ownerPID returns the PID in a name uniqueName made; ok is false for any
// other name (a namespace named by hand, or by another prefix's scheme).
func ownerPID(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, Prefix)
	if !found {
		return 0, false
	}
	digits, hexPart, found := strings.Cut(rest, "-")
	if !found || len(hexPart) != 10 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != digits {
		return 0, false
	}
	return pid, true
}

// running reports whether a process of that PID exists (signal 0 checks
// without sending: EPERM means it exists under another user).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sweepOrphans deletes the namespaces that test processes which no longer
// run left behind: a test binary killed (a benchmark stopped by a timeout,
// ^C) never runs its cleanups. Only names uniqueName made are considered,
// and only those whose process is gone; a namespace of a running test is
// never touched. It returns the names it deleted.
func sweepOrphans() ([]string, error) {
	dir := filepath.Dir(kernelnetns.NamedPath(Prefix))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, e := range entries {
		pid, ok := ownerPID(e.Name())
		if !ok || running(pid) {
			continue
		}
		if err := kernelnetns.DeleteNamed(e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("delete orphaned namespace %s: %w", filepath.Join(dir, e.Name()), err))
			continue
		}
		deleted = append(deleted, e.Name())
	}
	return deleted, errors.Join(errs...)
}
