// Command netclass-bridge is a CNI plugin: pods on a Linux bridge, with QoS.
package main

import (
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridge"
)

func main() {
	attach.Main(bridge.Funcs(), "netclass-bridge", "Linux bridge attachments with DSCP marking and shaping")
}
