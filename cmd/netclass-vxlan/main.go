// Command netclass-vxlan is a CNI plugin: pods on a VXLAN segment per VNI,
// with QoS.
package main

import (
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/vxlan"
)

func main() {
	attach.Main(vxlan.Funcs(), "netclass-vxlan", "VXLAN segments per VNI with DSCP marking and shaping")
}
