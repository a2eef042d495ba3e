// Command netclass-vlan is a CNI plugin: an 802.1Q sub-interface of a
// master device in the pod, with QoS.
package main

import (
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/vlan"
)

func main() {
	attach.Main(vlan.Funcs(), "netclass-vlan", "802.1Q VLAN attachments with DSCP marking and shaping")
}
