// Package bench holds netclass's benchmarks (`make bench`): the plugins
// against the upstream chain doing the same work, and the Kubernetes side.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// timeBin is GNU time, the spawner that measures a plugin's peak RSS.
const timeBin = "/usr/bin/time"

// rssExec runs plugins for libcni like invoke.RawExec does. With measure
// set it starts each plugin through GNU time and records the peak resident
// set size of the plugin process.
//
// The RSS cannot be read from this process's own wait4: Go starts children
// with CLONE_VM|CLONE_VFORK, and at exec the kernel folds the parent's
// high-water mark into the child's ru_maxrss, so every child would report
// at least this (large) test process. GNU time forks from a tiny process.
// Measuring passes are separate from timed passes, so the extra exec never
// weighs on the times.
type rssExec struct {
	measure bool
	mu      sync.Mutex
	peakKiB map[string]int64 // plugin binary -> largest peak RSS seen
}

func newRSSExec() *rssExec { return &rssExec{peakKiB: map[string]int64{}} }

// ExecPlugin implements invoke.Exec.
func (e *rssExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, pluginPath)
	var rssFile string
	if e.measure {
		f, err := os.CreateTemp("", "netclass-rss-")
		if err != nil {
			return nil, err
		}
		f.Close()
		rssFile = f.Name()
		defer os.Remove(rssFile)
		cmd = exec.CommandContext(ctx, timeBin, "-f", "%M", "-o", rssFile, pluginPath)
	}
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ, bytes.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	if e.measure {
		if rerr := e.record(pluginPath, rssFile); rerr != nil && err == nil {
			return nil, rerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s %s", pluginPath, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

func (e *rssExec) record(pluginPath, rssFile string) error {
	b, err := os.ReadFile(rssFile)
	if err != nil {
		return fmt.Errorf("read peak RSS of %s: %w", pluginPath, err)
	}
	lines := strings.Fields(string(b))
	if len(lines) == 0 {
		return fmt.Errorf("no peak RSS for %s", pluginPath)
	}
	kib, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		return fmt.Errorf("peak RSS of %s: %w", pluginPath, err)
	}
	e.mu.Lock()
	e.peakKiB[pluginPath] = max(e.peakKiB[pluginPath], kib)
	e.mu.Unlock()
	return nil
}

// FindInPath implements invoke.Exec.
func (e *rssExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

// Decode implements invoke.Exec.
func (e *rssExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}

// peak returns the largest peak RSS among the given binaries, in KiB.
func (e *rssExec) peak(paths ...string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var m int64
	for _, p := range paths {
		m = max(m, e.peakKiB[p])
	}
	return m
}
