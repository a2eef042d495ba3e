// Package vm runs a program inside Debian's stock kernel under qemu, as `go test -exec` expects
// of a runner: same binary, arguments, working directory and environment (plus NETCLASS_VM=1 and
// NETCLASS_NETDEVSIM_KO), stdout and stderr kept apart, and the exit status passed back.
//
// The guest's root is the host's / read-only over 9p with a tmpfs overlay on top; directories
// the program writes results to (coverage, -test.outputdir) are shared read-write so the files
// land on the host. The kernel, initramfs and netdevsim.ko come from scripts/vm/setup.sh.
//
// The same binary is the guest's init: Main runs on the host, GuestInit inside the VM.
package vm
