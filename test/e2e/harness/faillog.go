package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Lines of a daemon's log a failed test's output carries: its errors and
// warnings, and its last lines, of what it logged while the test ran.
const (
	failLogProblems = 60
	failLogLast     = 40
)

// logsOnFailure makes a test that fails log what each daemon logged while
// it ran, so that a failure seen only in CI (whose harness directory goes
// with the run) can be read from the test's output.
func (e *Env) logsOnFailure(t testing.TB) {
	offsets := make([]int64, len(e.DRAs))
	for i, d := range e.DRAs {
		if fi, err := os.Stat(d.LogPath); err == nil {
			offsets[i] = fi.Size()
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, d := range e.DRAs {
			t.Logf("netclass-dra on node %s while the test ran:%s", d.Node, d.since(offsets[i]))
		}
	})
}

// since is what the daemon logged from offset on: its errors and warnings
// (klog's E and W lines; the last failLogProblems) and its last failLogLast
// lines.
func (d *DRA) since(offset int64) string {
	raw, err := os.ReadFile(d.LogPath)
	if err != nil {
		return fmt.Sprintf(" (read %s: %v)", d.LogPath, err)
	}
	if offset > int64(len(raw)) {
		offset = 0 // the log was cut: all of it
	}
	lines := strings.Split(strings.TrimRight(string(raw[offset:]), "\n"), "\n")
	var problems []string
	for _, l := range lines {
		if strings.HasPrefix(l, "E") || strings.HasPrefix(l, "W") {
			problems = append(problems, l)
		}
	}
	return fmt.Sprintf("\n--- errors and warnings (%d, the last %d):\n%s\n--- the last %d lines:\n%s",
		len(problems), min(len(problems), failLogProblems), strings.Join(last(problems, failLogProblems), "\n"),
		failLogLast, strings.Join(last(lines, failLogLast), "\n"))
}

func last(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

// failTableLines bounds the lines of one nftables table a failed test's
// output carries.
const failTableLines = 400

// TablesOnFailure makes a test that fails log each node's nftables tables
// (as "family name": "inet netclass_pol") as the failure left them: call
// it after the test's pods and policies are made, so that it runs before
// the cleanups that remove them. A rule the kernel holds but the agent's
// log does not explain shows there.
func (e *Env) TablesOnFailure(t testing.TB, tables ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range e.Nodes {
			for _, table := range tables {
				out, err := n.Output(ctx, "nft", append([]string{"list", "table"}, strings.Fields(table)...)...)
				if err != nil {
					t.Logf("node %s: %v", n.Name, err)
					continue
				}
				lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
				cut := ""
				if len(lines) > failTableLines {
					cut = fmt.Sprintf(" (the first %d of %d lines)", failTableLines, len(lines))
					lines = lines[:failTableLines]
				}
				t.Logf("node %s, nftables table %s at the failure%s:\n%s", n.Name, table, cut, strings.Join(lines, "\n"))
			}
		}
	})
}
