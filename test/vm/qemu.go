package vm

import (
	"fmt"
	"strconv"
	"strings"
)

// qemuArgs is the qemu command line: the host's / read-only over 9p, the shares read-write,
// three virtio-serial ports (stdout and stderr FIFOs, the control socket) and the kernel
// console in a log file.
func qemuArgs(cfg Config, s *session, shares []share) []string {
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none", "-no-reboot",
		"-machine", "q35", "-m", cfg.Memory, "-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", cfg.vmlinux(), "-initrd", cfg.initramfs(), "-append", kernelCmdline(cfg),
		"-serial", "file:" + s.consoleLog,
		"-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
		"-device", "virtio-serial-pci,id=vser",
		"-chardev", "file,id=stdout,path=" + escape(s.stdout.fifo),
		"-device", "virtserialport,bus=vser.0,chardev=stdout,name=" + stdoutPort,
		"-chardev", "file,id=stderr,path=" + escape(s.stderr.fifo),
		"-device", "virtserialport,bus=vser.0,chardev=stderr,name=" + stderrPort,
		"-chardev", "socket,id=control,path=" + escape(s.controlSocket),
		"-device", "virtserialport,bus=vser.0,chardev=control,name=" + controlPort,
	}
	args = append(args, accelArgs(cfg.Accel)...)
	for _, sh := range shares {
		args = append(args,
			"-fsdev", fmt.Sprintf("local,id=%s,path=%s,security_model=none,multidevs=remap", sh.Tag, escape(sh.Path)),
			"-device", fmt.Sprintf("virtio-9p-pci,fsdev=%s,mount_tag=%s", sh.Tag, sh.Tag))
	}
	return args
}

func accelArgs(accel string) []string {
	if accel == "kvm" {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	return []string{"-accel", "tcg,thread=multi,tb-size=128", "-cpu", "max"}
}

// kernelCmdline names the agent the initramfs hands over to (scripts/vm/setup.sh reads
// netclass.agent=); panic=-1 with -no-reboot turns a guest panic into qemu exiting.
func kernelCmdline(cfg Config) string {
	line := "console=ttyS0 quiet panic=-1 mitigations=off netclass.agent=" + cfg.Agent
	if cfg.Append != "" {
		line += " " + cfg.Append
	}
	return line
}

// escape doubles the commas of a value inside a qemu option list.
func escape(v string) string { return strings.ReplaceAll(v, ",", ",,") }
