package netconf

import (
	"fmt"
	"testing"
)

func TestVLANDeviceNames(t *testing.T) {
	seen := map[string]string{}
	for _, master := range []string{"eth1", "eth2", "ens1f0np0", "underlay-15char"} {
		for _, id := range []int{1, 100, 200, MaxVLANID} {
			c := &VLAN{Master: master, VLANID: id}
			br, dev := c.BridgeName(), c.DeviceName()
			for _, name := range []string{br, dev} {
				if len(name) > 15 {
					t.Errorf("%s VLAN %d: %q is longer than IFNAMSIZ-1", master, id, name)
				}
				if ValidateIfName("name", name) != nil {
					t.Errorf("%s VLAN %d: %q is not a valid interface name", master, id, name)
				}
				gotBr, gotDev, ok := VLANDevicesOf(name)
				if !ok || gotBr != br || gotDev != dev {
					t.Errorf("VLANDevicesOf(%q) = %q, %q, %v; want %q, %q", name, gotBr, gotDev, ok, br, dev)
				}
			}
			key := fmt.Sprintf("%s/%d", master, id)
			if prev, dup := seen[br]; dup {
				t.Errorf("%s and %s share bridge %q", prev, key, br)
			}
			seen[br] = key
		}
	}
	for _, name := range []string{"ncbr100", "ncvx100", "eth1", "ncvb", "ncvl", ""} {
		if _, _, ok := VLANDevicesOf(name); ok {
			t.Errorf("VLANDevicesOf(%q) took it for a VLAN device", name)
		}
	}
}
