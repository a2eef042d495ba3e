// Command netclass-qos is a chained CNI plugin: DSCP marking, metered egress
// rules and shaping for the interface an earlier plugin created.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qoschain"
)

func main() {
	skel.PluginMainFuncs(qoschain.Funcs(), attach.Versions(), attach.About("netclass-qos", "DSCP marking, metering and shaping for any interface, chained"))
}
