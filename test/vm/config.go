package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config says which kernel to boot and how big a machine to give it.
type Config struct {
	Cache   string        // cache root written by scripts/vm/setup.sh
	Release string        // kernel release, a directory under Cache
	CPUs    int           // vCPUs
	Memory  string        // guest memory in qemu's -m syntax
	Timeout time.Duration // the guest is killed after this long
	Accel   string        // "tcg" or "kvm"
	QEMU    string        // qemu binary
	Agent   string        // absolute path of the vmexec binary, run as the guest's init
	KeepLog bool          // keep the console log even when the run succeeds
	Append  string        // extra kernel command line (debugging: "loglevel=7")
}

const setupHint = "run `make vm-deps` (scripts/vm/setup.sh) first"

// ConfigFromEnv reads NETCLASS_VM_CACHE, NETCLASS_VM_CPUS, NETCLASS_VM_MEM, NETCLASS_VM_TIMEOUT,
// NETCLASS_VM_ACCEL, NETCLASS_VM_KEEP_LOG and NETCLASS_VM_APPEND, and the kernel release that setup.sh prepared.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Cache: cacheDir(getenv), Memory: "512M", Timeout: 20 * time.Minute, QEMU: "qemu-system-x86_64"}
	var err error
	if cfg.CPUs, err = envInt(getenv, "NETCLASS_VM_CPUS", 1); err != nil {
		return Config{}, err
	}
	if v := getenv("NETCLASS_VM_MEM"); v != "" {
		cfg.Memory = v
	}
	if cfg.Timeout, err = envDuration(getenv, "NETCLASS_VM_TIMEOUT", cfg.Timeout); err != nil {
		return Config{}, err
	}
	if cfg.Accel, err = accel(getenv("NETCLASS_VM_ACCEL")); err != nil {
		return Config{}, err
	}
	cfg.KeepLog = getenv("NETCLASS_VM_KEEP_LOG") == "1"
	cfg.Append = getenv("NETCLASS_VM_APPEND")
	if cfg.Release, err = currentRelease(cfg.Cache); err != nil {
		return Config{}, err
	}
	if cfg.Agent, err = os.Executable(); err != nil {
		return Config{}, fmt.Errorf("find the vmexec binary: %w", err)
	}
	return cfg, cfg.check()
}

func cacheDir(getenv func(string) string) string {
	if v := getenv("NETCLASS_VM_CACHE"); v != "" {
		return v
	}
	base := getenv("XDG_CACHE_HOME")
	if base == "" {
		base = filepath.Join(getenv("HOME"), ".cache")
	}
	return filepath.Join(base, "netclass", "vm")
}

func envInt(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("env %s=%q: want a positive integer", name, v)
	}
	return n, nil
}

func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("env %s=%q: want a positive duration such as 20m", name, v)
	}
	return d, nil
}

// accel picks KVM only where a real KVM module (kvm_intel, kvm_amd) is loaded: a nested
// paravirtual /dev/kvm cannot run a stock kernel.
func accel(v string) (string, error) {
	switch v {
	case "tcg", "kvm":
		return v, nil
	case "":
	default:
		return "", fmt.Errorf("env NETCLASS_VM_ACCEL=%q: want tcg or kvm", v)
	}
	for _, m := range []string{"kvm_intel", "kvm_amd"} {
		if _, err := os.Stat("/sys/module/" + m); err == nil {
			return "kvm", nil
		}
	}
	return "tcg", nil
}

func currentRelease(cache string) (string, error) {
	b, err := os.ReadFile(filepath.Join(cache, "current"))
	if err != nil {
		return "", fmt.Errorf("no VM kernel prepared in %s: %s: %w", cache, setupHint, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c Config) kernelDir() string { return filepath.Join(c.Cache, c.Release) }
func (c Config) vmlinux() string   { return filepath.Join(c.kernelDir(), "vmlinux") }
func (c Config) initramfs() string { return filepath.Join(c.kernelDir(), "initramfs.cpio") }

// NetdevsimKO is the netdevsim module built for the guest kernel.
func (c Config) NetdevsimKO() string { return filepath.Join(c.kernelDir(), "netdevsim.ko") }

func (c Config) logDir() string { return filepath.Join(c.Cache, "logs") }

func (c Config) check() error {
	if _, err := exec.LookPath(c.QEMU); err != nil {
		return fmt.Errorf("find qemu: %s: %w", setupHint, err)
	}
	for _, f := range []string{c.vmlinux(), c.initramfs(), c.NetdevsimKO()} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("the VM kernel %s is incomplete: %s: %w", c.Release, setupHint, err)
		}
	}
	return nil
}
