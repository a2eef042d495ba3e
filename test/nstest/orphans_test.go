package nstest

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestOwnerPID(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{uniqueName(4242), 4242, true},
		{"nct-1-0123456789", 1, true},
		{"nct-0123456789", 0, false},        // the names before PIDs: never swept
		{"nct-named-lifecycle", 0, false},   // named by a test
		{"nct-mortal-0123456789", 0, false}, // sriov's
		{"nct-012-0123456789", 0, false},    // not a PID's spelling
		{"nct-12-0123456789a", 0, false},    // hex too long
		{"nct-12-012345678g", 0, false},     // not hex
		{"nct--0123456789", 0, false},
		{"x-12-0123456789", 0, false},
	} {
		pid, ok := ownerPID(c.name)
		if pid != c.pid || ok != c.ok {
			t.Errorf("ownerPID(%q) = %d, %v; want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
}

// A namespace left by a test process that no longer runs is deleted; one
// of a running process, and one named otherwise, are left alone.
func TestSweepOrphans(t *testing.T) {
	RequireRoot(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	alive := exec.Command("sleep", "600")
	if err := alive.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alive.Process.Kill(); _ = alive.Wait() })
	names := map[string]bool{ // name -> swept
		uniqueName(dead.Process.Pid):     true,
		uniqueName(alive.Process.Pid):    false,
		uniqueName(os.Getpid()):          false,
		Prefix + "sweep-" + randomHex(5): false,
	}
	for name := range names {
		n, err := Create(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Delete() })
	}
	gone, err := sweepOrphans()
	if err != nil {
		t.Fatal(err)
	}
	for name, swept := range names {
		_, statErr := os.Stat("/var/run/netns/" + name)
		if exists := statErr == nil; exists == swept {
			t.Errorf("namespace %s present after the sweep = %v, want %v", name, exists, !swept)
		}
		if reported := slices.Contains(gone, name); reported != swept {
			t.Errorf("sweep reported %s deleted = %v, want %v (reported %v)", name, reported, swept, gone)
		}
	}
}
