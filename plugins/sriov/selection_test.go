package sriov

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs/sysfstest"
)

// selectionTree: pf0 with VFs whose netdevs are "lo" (present in any
// namespace, so "in the host") or "absent0" (elsewhere), one vfio-pci VF,
// and pf1 with one VF.
func selectionTree(t *testing.T, vfs map[int]string) sysfs.FS {
	tr := sysfstest.New(t)
	tr.AddPF("pf0", pfAddr, 16)
	for i, netdev := range vfs {
		switch netdev {
		case "vfio":
			tr.AddVF(pfAddr, i, vfAddr(i), "vfio-pci")
		case "":
			tr.AddVF(pfAddr, i, vfAddr(i), "iavf")
		default:
			tr.AddVF(pfAddr, i, vfAddr(i), "iavf", netdev)
		}
	}
	tr.AddPF("pf1", "0000:04:00.0", 4)
	tr.AddVF("0000:04:00.0", 0, "0000:04:10.0", "iavf", "lo")
	return sysfs.New(tr.Root)
}

func TestSelection(t *testing.T) {
	tests := []struct {
		name    string
		vfs     map[int]string // VF index -> netdev ("lo": on the host), "vfio", or "" for none
		inUse   []int
		master  string
		device  string
		want    string // chosen VF's address
		netdev  string // the netdev chosen with it
		code    uint
		wantErr string
	}{
		{"lowest free VF", map[int]string{0: "lo", 1: "lo", 2: "lo"}, nil, "pf0", "", vfAddr(0), "lo", 0, ""},
		{"skips VFs in use", map[int]string{0: "lo", 1: "lo", 2: "lo"}, []int{0, 1}, "pf0", "", vfAddr(2), "lo", 0, ""},
		{"skips vfio-pci VFs", map[int]string{0: "vfio", 1: "lo"}, nil, "pf0", "", vfAddr(1), "lo", 0, ""},
		{"skips VFs whose netdev is elsewhere", map[int]string{0: "absent0", 1: "", 2: "lo"}, nil, "pf0", "", vfAddr(2), "lo", 0, ""},
		{"order by index, not address", map[int]string{9: "lo", 3: "lo"}, nil, "pf0", "", vfAddr(3), "lo", 0, ""},
		{"none free", map[int]string{0: "lo", 1: "vfio", 2: "absent0"}, []int{0}, "pf0", "", "", "", types.ErrTryAgainLater,
			`master: no free VF on "pf0": 3 VFs, 1 attached, 1 bound to vfio-pci (deviceID only), 1 without a netdev in the host namespace`},
		{"deviceID", map[int]string{0: "lo", 1: "lo"}, nil, "", vfAddr(1), vfAddr(1), "lo", 0, ""},
		{"deviceID and its master", map[int]string{0: "lo"}, nil, "pf0", vfAddr(0), vfAddr(0), "lo", 0, ""},
		{"deviceID of vfio-pci", map[int]string{0: "vfio"}, nil, "", vfAddr(0), vfAddr(0), "", 0, ""},
		{"deviceID in use", map[int]string{0: "lo"}, []int{0}, "", vfAddr(0), "", "", types.ErrInvalidNetworkConfig, "deviceID: VF " + vfAddr(0) + " is in use by ctr/net1"},
		{"deviceID elsewhere", map[int]string{0: "absent0"}, nil, "", vfAddr(0), "", "", types.ErrInvalidNetworkConfig, "deviceID: VF " + vfAddr(0) + " has no netdev in the host namespace"},
		{"deviceID of another master", map[int]string{0: "lo"}, nil, "pf1", vfAddr(0), "", "", types.ErrInvalidNetworkConfig, `is a VF of "pf0", not of master "pf1"`},
		{"deviceID is a PF", map[int]string{0: "lo"}, nil, "", pfAddr, "", "", types.ErrInvalidNetworkConfig, "deviceID: " + pfAddr + " is not a VF of any PF"},
		{"deviceID is nothing", map[int]string{0: "lo"}, nil, "", "0000:0a:00.1", "", "", types.ErrInvalidNetworkConfig, "deviceID: no PCI device 0000:0a:00.1"},
		{"master without VFs", map[int]string{}, nil, "pf0", "", "", "", types.ErrInvalidNetworkConfig, `master: PF "pf0" has no VFs enabled`},
		{"master missing", map[int]string{0: "lo"}, nil, "pf9", "", "", "", types.ErrInvalidNetworkConfig, `master: no network device "pf9"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := plugin{sys: selectionTree(t, tc.vfs)}
			c := &netconf.SRIOV{Master: tc.master, DeviceID: tc.device}
			inUse := map[string]string{}
			for _, i := range tc.inUse {
				inUse[vfAddr(i)] = "ctr/net1"
			}
			vf, netdev, err := choose(p, c, inUse)
			if tc.wantErr != "" {
				var e *types.Error
				if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg, tc.wantErr) {
					t.Fatalf("error %v, want CNI error %d containing %q", err, tc.code, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if vf.Addr != tc.want || netdev != tc.netdev {
				t.Errorf("chose %s with netdev %q, want %s with %q", vf.Addr, netdev, tc.want, tc.netdev)
			}
		})
	}
}

func choose(p plugin, c *netconf.SRIOV, inUse map[string]string) (sysfs.VF, string, error) {
	_, vfs, err := p.candidates(c)
	if err != nil {
		return sysfs.VF{}, "", err
	}
	return pick(c, vfs, inUse)
}

func TestHeldReadsEveryNetworksRecords(t *testing.T) {
	dir := t.TempDir()
	s := attach.Store{Dir: dir}
	put := func(network, plugin, id, extra string) {
		t.Helper()
		r := &attach.Record{Network: network, Plugin: plugin, ContainerID: id, IfName: "net1", Extra: json.RawMessage(extra)}
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	put("red", netconf.TypeSRIOV, "a", `{"pciAddress":"`+vfAddr(0)+`","pf":"pf0"}`)
	put("blue", netconf.TypeSRIOV, "b", `{"pciAddress":"`+vfAddr(1)+`","pf":"pf0","vfIndex":1}`)
	put("blue", netconf.TypeBridge, "c", ``)
	unlock, err := attach.Lock(dir, "sriov-pf0") // a locks/ directory is no network
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	got, err := held(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{vfAddr(0): `a/net1 of network "red"`, vfAddr(1): `b/net1 of network "blue"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("held = %v, want %v", got, want)
	}
	if got, err := held(dir + "/missing"); err != nil || len(got) != 0 {
		t.Errorf("held(missing dir) = %v, %v; want nothing", got, err)
	}
	put("green", netconf.TypeSRIOV, "d", `{"pf":"pf0"}`)
	if _, err := held(dir); err == nil || !strings.Contains(err.Error(), "record of d/net1 names no VF") {
		t.Errorf("held with a record naming no VF: %v", err)
	}
}
