package vm

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// hostTmp is where the agent keeps the host's /tmp in view while it puts a tmpfs over /tmp.
const hostTmp = "/run/netclass-vm/host-tmp"

type mountPoint struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

func (m mountPoint) mount() error {
	if err := os.MkdirAll(m.target, 0o755); err != nil {
		return fmt.Errorf("create mount point %s: %w", m.target, err)
	}
	if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", m.source, m.fstype, m.target, err)
	}
	return nil
}

func bind(source, target string) mountPoint {
	return mountPoint{source: source, target: target, flags: unix.MS_BIND}
}

// baseMounts are needed to find the virtio-serial ports.
func baseMounts() []mountPoint {
	return []mountPoint{
		{source: "proc", target: "/proc", fstype: "proc", flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{source: "sysfs", target: "/sys", fstype: "sysfs", flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	}
}

// systemMounts are what tests expect of a Linux host (/dev itself comes from the initramfs).
func systemMounts() []mountPoint {
	return []mountPoint{
		{source: "devpts", target: "/dev/pts", fstype: "devpts", flags: unix.MS_NOSUID | unix.MS_NOEXEC, data: "gid=5,mode=620,ptmxmode=666"},
		{source: "shm", target: "/dev/shm", fstype: "tmpfs", flags: unix.MS_NOSUID | unix.MS_NODEV, data: "mode=1777"},
		{source: "run", target: "/run", fstype: "tmpfs", flags: unix.MS_NOSUID | unix.MS_NODEV, data: "mode=755"},
		{source: "cgroup2", target: "/sys/fs/cgroup", fstype: "cgroup2", flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{source: "bpffs", target: "/sys/fs/bpf", fstype: "bpf", flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, data: "mode=700"},
		{source: "debugfs", target: "/sys/kernel/debug", fstype: "debugfs", flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	}
}

// prepare mounts what tests need, puts a fresh tmpfs on /tmp that still shows the program's
// and the working directory's host contents, mounts the read-write shares and brings lo up.
func prepare(sp spec) error {
	for _, m := range systemMounts() {
		if err := m.mount(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll("/run/netns", 0o755); err != nil {
		return fmt.Errorf("create /run/netns: %w", err)
	}
	if err := freshTmp(sp.Binds); err != nil {
		return err
	}
	for _, sh := range sp.Shares {
		m := mountPoint{source: sh.Tag, target: sh.Path, fstype: "9p", data: "trans=virtio,version=9p2000.L,msize=512000,cache=none"}
		if err := m.mount(); err != nil {
			return err
		}
	}
	return loopbackUp()
}

// freshTmp mounts a tmpfs on /tmp and binds back the directories of keep that lie in /tmp.
func freshTmp(keep []string) error {
	var inTmp []string
	for _, d := range keep {
		if within(d, "/tmp") {
			inTmp = append(inTmp, d)
		}
	}
	slices.SortFunc(inTmp, func(a, b string) int { return cmp.Compare(len(a), len(b)) })
	mounts := []mountPoint{bind("/tmp", hostTmp), {source: "tmp", target: "/tmp", fstype: "tmpfs", flags: unix.MS_NOSUID | unix.MS_NODEV, data: "mode=1777"}}
	for _, d := range inTmp {
		mounts = append(mounts, bind(filepath.Join(hostTmp, strings.TrimPrefix(d, "/tmp")), d))
	}
	for _, m := range mounts {
		if err := m.mount(); err != nil {
			return err
		}
	}
	if err := unix.Unmount(hostTmp, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", hostTmp, err)
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring lo up: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}
