// Command netclass-sriov is a CNI plugin: SR-IOV VFs in pods, with QoS.
// NETCLASS_SYSFS_ROOT moves the sysfs root it reads (default /sys).
package main

import (
	"os"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/sriov"
)

func main() {
	attach.Main(sriov.Funcs(os.Getenv(sriov.EnvSysfsRoot)), "netclass-sriov", "SR-IOV VF attachments with DSCP marking and shaping")
}
