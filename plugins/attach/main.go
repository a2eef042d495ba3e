package attach

import (
	"os"
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/netconf"
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
	skel.PluginMainFuncs(CheckIfName(funcs), Versions(), About(plugin, what))
}

// CheckIfName makes ADD and CHECK refuse, before any work, a CNI_IFNAME that
// the CNI library lets through but netclass does not take
// (netconf.ValidateIfName: NUL, '%', non-printable, non-ASCII): CNI error 4,
// invalid environment variables. DEL is left alone: no ADD succeeded with
// such a name, so there is nothing to delete and DEL stays a success.
func CheckIfName(f skel.CNIFuncs) skel.CNIFuncs {
	wrap := func(fn func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
		if fn == nil {
			return nil
		}
		return func(a *skel.CmdArgs) error {
			if err := netconf.ValidateIfName("CNI_IFNAME", a.IfName); err != nil {
				return types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
			}
			return fn(a)
		}
	}
	f.Add, f.Check = wrap(f.Add), wrap(f.Check)
	return f
}
