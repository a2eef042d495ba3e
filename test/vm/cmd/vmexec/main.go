// Command vmexec runs a program inside Debian's stock kernel under qemu; use it as
// `go test -exec bin/vmexec`. Inside the guest the same binary is init (`vmexec guest-init`).
package main

import (
	"os"

	"github.com/netclass-dev/netclass/test/vm"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "guest-init" && os.Getpid() == 1 {
		vm.GuestInit()
	}
	os.Exit(vm.Main(os.Args[1:]))
}
