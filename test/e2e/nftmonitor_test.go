//go:build testbed

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// nftMonitor records what `nft monitor` reports in the test process's
// network namespace (node 1's, the host's) from its start until stop.
type nftMonitor struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []monitorLine
	done  chan struct{}
}

// monitorLine is one line nft monitor printed, and when the test read it.
type monitorLine struct {
	at   time.Time
	text string
}

// startNFTMonitor starts `nft monitor` and returns once it reports: a
// marker table of the test's own, added and deleted, has been seen.
func startNFTMonitor(t *testing.T) *nftMonitor {
	t.Helper()
	m := &nftMonitor{cmd: exec.Command("nft", "monitor"), done: make(chan struct{})}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("nft monitor: %v", err)
	}
	t.Cleanup(func() { m.stop() })
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m.mu.Lock()
			m.lines = append(m.lines, monitorLine{time.Now(), sc.Text()})
			m.mu.Unlock()
		}
	}()
	marker := "e2e_monitor_" + harness.Unique(6)
	testbed.Poll(t, testbed.Context(t, 30*time.Second), 100*time.Millisecond, "nft monitor reporting", func(context.Context) (bool, string, error) {
		if out, err := exec.Command("nft", "add table inet "+marker+"; delete table inet "+marker).CombinedOutput(); err != nil {
			return false, "", fmt.Errorf("marker table: %v: %s", err, out)
		}
		return slices.ContainsFunc(m.seen(), func(l monitorLine) bool { return l.text == "add table inet "+marker }), "", nil
	})
	return m
}

func (m *nftMonitor) seen() []monitorLine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

// stop ends the monitor (the process this test started) and returns every
// line it reported.
func (m *nftMonitor) stop() []monitorLine {
	if m.cmd.ProcessState == nil {
		m.cmd.Process.Kill()
		m.cmd.Wait()
	}
	<-m.done
	return m.seen()
}

// guardOpenedAfter returns how long after the host end was added to the
// port guard's closed set it was opened: added to its opened set (or,
// under an older netclass's base rules, deleted from closed), as the lines
// were read; ok is false unless both were seen. A line may list several
// elements.
func guardOpenedAfter(lines []monitorLine, hostIf string) (after time.Duration, ok bool) {
	const guard = " element bridge netclass_guard "
	elem := `"` + hostIf + `"`
	var closedAt time.Time
	for _, l := range lines {
		switch {
		case !strings.Contains(l.text, elem):
		case strings.HasPrefix(l.text, "add"+guard+"closed {"):
			closedAt = l.at
		case !closedAt.IsZero() && (strings.HasPrefix(l.text, "add"+guard+"opened {") || strings.HasPrefix(l.text, "delete"+guard+"closed {")):
			return l.at.Sub(closedAt), true
		}
	}
	return 0, false
}
