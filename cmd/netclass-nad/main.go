// Command netclass-nad is a CNI plugin: it runs the configuration list
// netclass-dra rendered on this node for the netclass network its config
// names (the NetworkAttachmentDefinitions netclass-controller generates).
package main

import (
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/nad"
)

func main() {
	attach.Main(nad.Funcs(), nad.Type, "delegates to the configuration netclass-dra rendered for a netclass network on this node")
}
