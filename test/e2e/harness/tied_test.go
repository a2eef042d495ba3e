package harness

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tiedChildEnv makes the test binary, run again, start a tied child and panic.
const tiedChildEnv = "NETCLASS_TIED_CHILD"

// TestMain runs, in the test binary started again by TestTiedChildDiesWithTest,
// the test process that panics while a tied child runs; otherwise the tests.
func TestMain(m *testing.M) {
	if os.Getenv(tiedChildEnv) != "" {
		panicWithTiedChild()
	}
	os.Exit(m.Run())
}

func panicWithTiedChild() {
	cmd := exec.Command("sleep", "1000")
	if _, err := startTied(cmd); err != nil {
		panic(err)
	}
	os.Stdout.WriteString("child " + strconv.Itoa(cmd.Process.Pid) + "\n")
	panic("a test panics while netclass-dra runs")
}

// A process started by startTied dies with a test process that panics.
func TestTiedChildDiesWithTest(t *testing.T) {
	test := exec.Command(os.Args[0])
	test.Env = append(os.Environ(), tiedChildEnv+"=1")
	out, err := test.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := test.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if n, ok := strings.CutPrefix(sc.Text(), "child "); ok {
			pid, _ = strconv.Atoi(n)
		}
	}
	if err := test.Wait(); err == nil {
		t.Fatal("the panicking test process exited 0")
	}
	if pid == 0 {
		t.Fatal("the panicking test process reported no child")
	}
	// The kernel delivers SIGKILL as the thread ends; the child, reparented,
	// is reaped by init. Poll for it to be gone, with a deadline.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL) // the child this test made, by its PID
			t.Fatalf("child %d outlived the panicking test process", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	fields := strings.Fields(string(stat))
	return err != nil || len(fields) < 3 || fields[2] != "Z"
}
