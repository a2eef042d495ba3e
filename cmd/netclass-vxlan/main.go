// Command netclass-vxlan is a CNI plugin: pods on a VXLAN segment per VNI,
// with QoS.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/vxlan"
)

func main() {
	skel.PluginMainFuncs(vxlan.Funcs(), attach.Versions(), attach.About("netclass-vxlan", "VXLAN segments per VNI with DSCP marking and shaping"))
}
