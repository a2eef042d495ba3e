# VM test harness: tests that need a stock kernel (802.1Q, tc flower/police, netdevsim...) run
# inside Debian's kernel under qemu. See test/vm/README.md.
#   make vm-deps                      install qemu and the kernel, build vmlinux/initramfs/netdevsim
#   make test-vm [VM_PKGS=./plugins/...] [VM_TEST_TIMEOUT=15m]
VM_PKGS ?= ./...
# Per test binary, inside the guest; below the runner's own NETCLASS_VM_TIMEOUT (default 20m) so a
# stuck test panics with its goroutines rather than being killed with the VM.
VM_TEST_TIMEOUT ?= 15m

.PHONY: vm-deps vmexec test-vm $(BIN)/vmexec
vm-deps:
	scripts/vm/setup.sh

$(BIN)/vmexec:
	$(GO) build -o $@ ./test/vm/cmd/vmexec

vmexec: $(BIN)/vmexec

test-vm: vm-deps $(BIN)/vmexec
	$(GO) test -tags vmtest -exec $(BIN)/vmexec -p 1 -timeout $(VM_TEST_TIMEOUT) $(VM_PKGS)
