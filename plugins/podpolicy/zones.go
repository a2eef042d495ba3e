package podpolicy

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/portguard"
)

// bridgesOf readies the bridges of the ports at idx for their policy: each
// hands its IP traffic to the host's hooks (br_netfilter) and has its own
// conntrack zone. It returns, by bridge index, why one is not ready (its
// ports must stay closed).
func bridgesOf(c *nftables.Conn, where []place, idx []int) map[int]error {
	out := map[int]error{}
	var zoned []nft.ZoneBridge
	links := map[int]netlink.Link{}
	for _, i := range idx {
		br := where[i].bridge
		a := br.Attrs()
		if _, done := out[a.Index]; done {
			continue
		}
		out[a.Index] = portguard.BridgeNetfilter(br)
		if out[a.Index] == nil && link.Tagged(br) {
			zoned = append(zoned, nft.ZoneBridge{Name: a.Name, Index: a.Index, MAC: a.HardwareAddr})
			links[a.Index] = br
		}
	}
	// a bridge of an earlier release, whose MAC still follows its ports',
	// has it fixed when it gets its zone
	fix := func(b nft.ZoneBridge) error { return link.FixMAC(links[b.Index]) }
	for index, err := range zones(c, zoned, fix) {
		out[index] = err
	}
	return out
}

// zones gives each bridge its conntrack zone (nft.EnsureZones) and returns,
// by bridge index, why one has none. Only bridges netclass made get one: a
// bridge of the primary network or of another plugin carries traffic the
// node routes between its ports (a Service's, DNATed to a pod of the same
// bridge, whose reply is bridged), which conntrack must see in one zone.
func zones(c *nftables.Conn, bridges []nft.ZoneBridge, fix func(nft.ZoneBridge) error) map[int]error {
	out := map[int]error{}
	if len(bridges) == 0 {
		return out
	}
	refused, err := nft.EnsureZones(c, bridges, exists, fix)
	for _, b := range bridges {
		switch {
		case err != nil:
			out[b.Index] = fmt.Errorf("conntrack zone of bridge %q: %w", b.Name, err)
		case refused[b.Name] != nil:
			out[b.Index] = refused[b.Name]
		}
	}
	return out
}

// exists: a link of that name is there (or may be: an error other than
// not found keeps its zone).
func exists(name string) bool {
	_, err := link.ByName(name)
	return !link.IsNotFound(err)
}
