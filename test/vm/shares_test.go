//go:build !vmtest

package vm

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSharedDirs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{name: "no output flags", args: []string{"-test.v=true", "-test.run", "X"}},
		{
			name: "go test -coverprofile",
			args: []string{"-test.paniconexit0", "-test.gocoverdir=/tmp/b/b001/gocoverdir", "-test.coverprofile=/tmp/b/b001/_cover_.out"},
			want: []string{"/tmp/b/b001"},
		},
		{
			name: "profiles relative to -test.outputdir",
			args: []string{"-test.outputdir=/out", "-test.cpuprofile=cpu.out", "-test.memprofile", "sub/mem.out"},
			want: []string{"/out"},
		},
		{
			name: "relative to the working directory, two dashes, GOCOVERDIR",
			args: []string{"--test.coverprofile=c/c.out", "-test.testlogfile", "/log/t.txt"},
			env:  []string{"GOCOVERDIR=/cov", "GOCOVERDIR=/cov2"},
			want: []string{"/cov2", "/log", "/work/pkg/c"},
		},
		{
			name: "a sibling with a common prefix is kept apart",
			args: []string{"-test.outputdir=/a/b", "-test.gocoverdir=/a/b-x", "-test.trace=/a/b/c/t.out"},
			want: []string{"/a/b", "/a/b-x"},
		},
		{name: "after --", args: []string{"--", "-test.coverprofile=/x/c.out"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sharedDirs(c.args, c.env, "/work/pkg"); !slices.Equal(got, c.want) {
				t.Fatalf("sharedDirs(%q, %q) = %q, want %q", c.args, c.env, got, c.want)
			}
		})
	}
}

func TestConfigFromEnvRejectsBadValues(t *testing.T) {
	for name, value := range map[string]string{
		"NETCLASS_VM_CPUS": "0", "NETCLASS_VM_TIMEOUT": "soon", "NETCLASS_VM_ACCEL": "hvf",
	} {
		env := map[string]string{"NETCLASS_VM_CACHE": t.TempDir(), name: value}
		_, err := ConfigFromEnv(func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming %s", name, value, err, name)
		}
	}
}

func TestConfigFromEnvWantsSetup(t *testing.T) {
	env := map[string]string{"NETCLASS_VM_CACHE": t.TempDir()}
	_, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "make vm-deps") {
		t.Fatalf("error %v, want one telling to run make vm-deps", err)
	}
}

func TestQEMUArgs(t *testing.T) {
	cfg := Config{Cache: "/c", Release: "6.1.0-x", CPUs: 2, Memory: "1G", Timeout: time.Minute, Accel: "tcg", Agent: "/bin/vmexec"}
	s := &session{consoleLog: "/c/logs/console.log", controlSocket: "/r/control.sock",
		stdout: &stream{fifo: "/r/stdout"}, stderr: &stream{fifo: "/r/stderr"}}
	args := strings.Join(qemuArgs(cfg, s, []share{{Tag: "share0", Path: "/tmp/a,b"}}), " ")
	for _, want := range []string{
		"-accel tcg,thread=multi,tb-size=128 -cpu max", "-smp 2", "-m 1G", "-machine q35",
		"-kernel /c/6.1.0-x/vmlinux", "-initrd /c/6.1.0-x/initramfs.cpio", "netclass.agent=/bin/vmexec",
		"path=/,security_model=none,readonly=on,multidevs=remap",
		"local,id=share0,path=/tmp/a,,b,security_model=none", "mount_tag=share0",
		"file,id=stdout,path=/r/stdout", "name=netclass.stderr", "socket,id=control,path=/r/control.sock",
		"-serial file:/c/logs/console.log", "-no-reboot",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("qemu args lack %q:\n%s", want, args)
		}
	}
}
