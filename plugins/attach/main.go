package attach

import (
	"os"
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
)

// Main runs a netclass plugin: the skel dispatch, on one P. A plugin is a
// short-lived, I/O-bound process (netlink, an IPAM exec): a single P loses
// no time, since blocking syscalls hand it over, and the runtime then starts
// fewer threads, which lowers the peak RSS measured by make bench. A
// GOMAXPROCS set in the environment wins.
func Main(funcs skel.CNIFuncs, plugin, what string) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	skel.PluginMainFuncs(funcs, Versions(), About(plugin, what))
}
