// Command netclass-qos is a chained CNI plugin: DSCP marking, metered egress
// rules and shaping for the interface an earlier plugin created.
package main

import (
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qoschain"
)

func main() {
	attach.Main(qoschain.Funcs(), "netclass-qos", "DSCP marking, metering and shaping for any interface, chained")
}
