package vlan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
)

const plugin = "netclass-vlan"

// conf renders a netclass-vlan network on master eth1 with host-local
// addresses from [start, end] of subnet.
func conf(t *testing.T, vlanID int, subnet, start, end string, extra map[string]any) []byte {
	t.Helper()
	c := map[string]any{
		"cniVersion": "1.1.0", "name": "vl", "type": plugin, "master": "eth1", "vlanId": vlanID,
		"dataDir": t.TempDir(),
		"ipam": map[string]any{"type": "host-local", "dataDir": t.TempDir(),
			"ranges": []any{[]any{map[string]any{"subnet": subnet, "rangeStart": start, "rangeEnd": end}}}},
	}
	for k, v := range extra {
		c[k] = v
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestErrors covers what fails before any 802.1Q device is made, so it runs
// on every kernel.
func TestErrors(t *testing.T) {
	h := cnitest.NewHost(t)
	peer := nstest.New(t)
	nstest.Veth(t, h.NS, "eth1", "", peer, "eth1", "")
	p := cnitest.NewPod(t)
	tests := []struct {
		name  string
		cmd   string
		extra map[string]any
		code  uint
		want  string
	}{
		{"missing master", "ADD", map[string]any{"master": "nope0"}, types.ErrInvalidNetworkConfig, `master: find link "nope0"`},
		{"mtu above the master's", "ADD", map[string]any{"mtu": 9000}, types.ErrInvalidNetworkConfig, `mtu: 9000 exceeds the MTU of master "eth1" (1500)`},
		{"bad vlanId", "ADD", map[string]any{"vlanId": 4095}, types.ErrInvalidNetworkConfig, "vlanId: must be between 1 and 4094, got 4095"},
		{"STATUS without master", "STATUS", map[string]any{"master": "nope0"}, attach.ErrPluginNotAvailable, "nope0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Exec(p.Call(plugin, tc.cmd, "net1", conf(t, 100, "10.70.0.0/24", "10.70.0.10", "10.70.0.20", tc.extra)))
			var e *types.Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg, tc.want) {
				t.Fatalf("error = %v, want code %d containing %q", err, tc.code, tc.want)
			}
		})
	}
	if p.NS.HasLink(t, "net1") {
		t.Error("a refused ADD left a link in the pod")
	}
	if err := h.Del(plugin, conf(t, 100, "10.70.0.0/24", "10.70.0.10", "10.70.0.20", nil), p, "net1"); err != nil {
		t.Errorf("DEL of an attachment never made: %v", err)
	}
}
