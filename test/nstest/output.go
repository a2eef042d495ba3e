package nstest

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Output runs a command inside the namespace and returns its standard
// output. A command that fails (a missing binary, a refused argument, an
// error from the kernel) fails the test with its standard error: a leak
// check that reads the output never takes a failure for "nothing there".
func (n *NS) Output(t testing.TB, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := n.Run(func() error {
		cmd := exec.Command(name, args...) // forked from this thread: inside the namespace
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	if err != nil {
		t.Fatalf("%s %s in netns %s: %v: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String()
}

// Ruleset is the namespace's whole nftables ruleset (`nft list ruleset`,
// through Output): empty when the namespace has no table. Leak checks read
// it rather than one table, which fails to list when it was never made.
func (n *NS) Ruleset(t testing.TB) string {
	t.Helper()
	return n.Output(t, "nft", "list", "ruleset")
}
