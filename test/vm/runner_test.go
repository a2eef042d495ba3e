//go:build !vmtest

package vm_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// These tests boot the VM for real (scripts/vm/setup.sh must have run: make vm-deps). The
// subtests run in parallel, so several runners share the machine at once.
func TestRunner(t *testing.T) {
	bin := buildBinaries(t)
	t.Run("exit status 0", func(t *testing.T) {
		t.Parallel()
		r := bin.run(t, nil, "", "exit", "0")
		r.wantExit(t, 0)
	})
	t.Run("exit status 7", func(t *testing.T) {
		t.Parallel()
		r := bin.run(t, nil, "", "exit", "7")
		r.wantExit(t, 7)
	})
	t.Run("stdout and stderr", func(t *testing.T) {
		t.Parallel()
		testOutput(t, bin)
	})
	t.Run("working directory and environment", func(t *testing.T) {
		t.Parallel()
		testWhereami(t, bin)
	})
	t.Run("coverage profile", func(t *testing.T) {
		t.Parallel()
		testCoverage(t, bin)
	})
	t.Run("hung guest", func(t *testing.T) {
		t.Parallel()
		testHang(t, bin)
	})
}

type binaries struct{ vmexec, probe string }

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	dir := t.TempDir()
	b := binaries{vmexec: filepath.Join(dir, "vmexec"), probe: filepath.Join(dir, "probe")}
	for pkg, out := range map[string]string{"./cmd/vmexec": b.vmexec, "./testdata/probe": b.probe} {
		if out, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return b
}

type outcome struct {
	stdout, stderr []byte
	exit           int
}

// run runs the probe through vmexec in dir (the test's own directory when empty).
func (b binaries) run(t *testing.T, env []string, dir string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(b.vmexec, append([]string{b.probe}, args...)...)
	cmd.Env, cmd.Dir = append(os.Environ(), env...), dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run vmexec: %v", err)
	}
	return outcome{stdout: stdout.Bytes(), stderr: stderr.Bytes(), exit: cmd.ProcessState.ExitCode()}
}

func (o outcome) wantExit(t *testing.T, want int) {
	t.Helper()
	if o.exit != want {
		t.Fatalf("vmexec exited %d, want %d\nstderr: %s", o.exit, want, o.stderr)
	}
}

func testOutput(t *testing.T, bin binaries) {
	const nout, nerr = 200000, 60000 // 3 MB and 0.9 MB, interleaved
	r := bin.run(t, nil, "", "output", strconv.Itoa(nout), strconv.Itoa(nerr))
	r.wantExit(t, 0)
	checkLines(t, "stdout", r.stdout, nout)
	checkLines(t, "stderr", r.stderr, nerr)
}

// checkLines wants exactly n lines "<name> %07d" counting up from 0.
func checkLines(t *testing.T, name string, b []byte, n int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(b))
	i := 0
	for ; sc.Scan(); i++ {
		if want := fmt.Sprintf("%s %07d", name, i); sc.Text() != want {
			t.Fatalf("%s line %d is %q, want %q", name, i+1, sc.Text(), want)
		}
	}
	if i != n {
		t.Fatalf("%s has %d lines, want %d", name, i, n)
	}
}

// report is what `probe whereami` prints.
type report struct {
	Dir    string
	Env    []string
	Marker string
	UID    int
	TmpFS  bool
	TmpErr string
}

func testWhereami(t *testing.T, bin binaries) {
	dir := t.TempDir() // under /tmp, which the guest covers with a tmpfs
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := "NETCLASS_PROBE_VALUE=spaces and 'quotes', \"commas\" = signs"
	r := bin.run(t, []string{extra}, dir, "whereami")
	r.wantExit(t, 0)
	var got report
	if err := json.Unmarshal(r.stdout, &got); err != nil {
		t.Fatalf("decode probe report %q: %v", r.stdout, err)
	}
	if got.Dir != dir || got.Marker != "from the host" || got.UID != 0 {
		t.Fatalf("guest ran in %q as uid %d seeing marker %q; want %q, uid 0, %q", got.Dir, got.UID, got.Marker, dir, "from the host")
	}
	if !got.TmpFS || got.TmpErr != "" {
		t.Fatalf("guest /tmp: tmpfs=%v, create error %q; want a writable tmpfs", got.TmpFS, got.TmpErr)
	}
	checkEnv(t, got.Env, append(os.Environ(), extra, "NETCLASS_VM=1"))
}

func checkEnv(t *testing.T, got, want []string) {
	t.Helper()
	for _, kv := range want {
		if !slices.Contains(got, kv) {
			t.Errorf("guest environment lacks %q", kv)
		}
	}
	ko := ""
	for _, kv := range got {
		if v, ok := strings.CutPrefix(kv, "NETCLASS_NETDEVSIM_KO="); ok {
			ko = v
		}
	}
	if _, err := os.Stat(ko); ko == "" || err != nil {
		t.Errorf("guest NETCLASS_NETDEVSIM_KO=%q does not name the host's netdevsim.ko: %v", ko, err)
	}
}

func testCoverage(t *testing.T, bin binaries) {
	profile := filepath.Join(t.TempDir(), "cover.out")
	cmd := exec.Command("go", "test", "-count=1", "-exec", bin.vmexec, "-coverprofile", profile, "./testdata/covered")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -exec vmexec -coverprofile: %v\n%s", err, out)
	}
	b, err := os.ReadFile(profile)
	if err != nil {
		t.Fatalf("the coverage profile did not come back: %v", err)
	}
	// covered.go:6 (Called) ran in the guest, covered.go:9 (NotCalled) did not.
	for _, re := range []string{`(?m)^mode: set$`, `(?m)covered\.go:6\.\S+ 1 1$`, `(?m)covered\.go:9\.\S+ 1 0$`} {
		if !regexp.MustCompile(re).Match(b) {
			t.Fatalf("coverage profile does not match %s:\n%s", re, b)
		}
	}
}

func testHang(t *testing.T, bin binaries) {
	r := bin.run(t, []string{"NETCLASS_VM_TIMEOUT=20s"}, "", "hang")
	r.wantExit(t, 125)
	m := regexp.MustCompile(`did not finish within 20s .*killed qemu pid (\d+)`).FindSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("vmexec's error does not report the timeout and the killed qemu:\n%s", r.stderr)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("qemu pid %d is still there after vmexec returned (kill 0: %v)", pid, err)
	}
}
