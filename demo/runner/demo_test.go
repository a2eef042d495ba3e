package runner

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/conf/demo"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
)

// TestDefaultScenario runs `make demo`'s job and requires every check to
// hold and nothing to be left behind.
func TestDefaultScenario(t *testing.T) {
	nstest.RequireRoot(t)
	s, err := demo.Parse(demo.Default())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = (&Runner{S: s, BinDir: cnitest.Plugins(t), Out: &out}).Run(context.Background())
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "checks passed") {
		t.Fatal("the demo did not report its checks")
	}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			t.Errorf("the demo left namespace %s", e.Name())
		}
	}
	if _, err := os.Stat(WorkDir()); !os.IsNotExist(err) {
		t.Errorf("the demo left %s", WorkDir())
	}
}

// TestInterruptedRunCleansUp cancels a run while it builds.
func TestInterruptedRunCleansUp(t *testing.T) {
	nstest.RequireRoot(t)
	s, err := demo.Parse(demo.Default())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = (&Runner{S: s, BinDir: cnitest.Plugins(t), Out: &bytes.Buffer{}}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("Run with a cancelled context = %v, want an interruption", err)
	}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			t.Errorf("the interrupted demo left namespace %s", e.Name())
		}
	}
}
