package link

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ErrNoBridgeNetfilter: the kernel's br_netfilter is not loaded and could
// not be, so bridged IP traffic never meets the host's inet hooks (where
// netclass's switch-port NetworkPolicy lives).
var ErrNoBridgeNetfilter = errors.New("br_netfilter is not loaded (modprobe br_netfilter)")

// brnfSysctl exists (in every network namespace) once br_netfilter is loaded.
const brnfSysctl = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// BridgeNetfilterLoaded reports whether the kernel's br_netfilter is there.
func BridgeNetfilterLoaded() bool {
	_, err := os.Stat(brnfSysctl)
	return err == nil
}

// LoadBridgeNetfilter loads br_netfilter with modprobe when it is not there
// yet (nothing asks the kernel to load it on demand, as creating a vxlan or
// vlan link does for theirs; nft.RequestBridgeNetfilter is the way without
// modprobe).
func LoadBridgeNetfilter() error {
	if BridgeNetfilterLoaded() {
		return nil
	}
	out, err := exec.Command("modprobe", "br_netfilter").CombinedOutput()
	if BridgeNetfilterLoaded() {
		return nil
	}
	return fmt.Errorf("%w: modprobe: %v %s", ErrNoBridgeNetfilter, err, strings.TrimSpace(string(out)))
}

// BridgeNetfilter makes the bridge hand its bridged IPv4 and IPv6 traffic
// to the host's inet hooks (the bridge options nf_call_iptables and
// nf_call_ip6tables, whatever the node-wide sysctls
// net.bridge.bridge-nf-call-ip(6)tables say), br_netfilter being loaded.
// vishvananda/netlink does not expose these options: the request is built
// here.
func BridgeNetfilter(bridge netlink.Link) error {
	if !BridgeNetfilterLoaded() {
		return ErrNoBridgeNetfilter
	}
	on, err := bridgeNetfilterOn(bridge)
	if err != nil || on {
		return err
	}
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(bridge.Attrs().Index)
	req.AddData(msg)
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	data.AddRtAttr(nl.IFLA_BR_NF_CALL_IPTABLES, []byte{1})
	data.AddRtAttr(nl.IFLA_BR_NF_CALL_IP6TABLES, []byte{1})
	req.AddData(info)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("turn on nf_call_iptables of bridge %q: %w", bridge.Attrs().Name, err)
	}
	return nil
}

// bridgeNetfilterOn reports whether both options are on.
func bridgeNetfilterOn(bridge netlink.Link) (bool, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(bridge.Attrs().Index)
	req.AddData(msg)
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil || len(msgs) == 0 {
		return false, errors.Join(err, fmt.Errorf("read bridge %q", bridge.Attrs().Name))
	}
	attrs, err := nl.ParseRouteAttr(msgs[0][unix.SizeofIfInfomsg:])
	if err != nil {
		return false, fmt.Errorf("read bridge %q: %w", bridge.Attrs().Name, err)
	}
	v4, v6 := false, false
	for _, a := range attrs {
		if a.Attr.Type != unix.IFLA_LINKINFO {
			continue
		}
		infos, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return false, err
		}
		for _, i := range infos {
			if i.Attr.Type&^unix.NLA_F_NESTED != nl.IFLA_INFO_DATA {
				continue
			}
			data, err := nl.ParseRouteAttr(i.Value)
			if err != nil {
				return false, err
			}
			for _, d := range data {
				switch d.Attr.Type {
				case nl.IFLA_BR_NF_CALL_IPTABLES:
					v4 = len(d.Value) > 0 && d.Value[0] == 1
				case nl.IFLA_BR_NF_CALL_IP6TABLES:
					v6 = len(d.Value) > 0 && d.Value[0] == 1
				}
			}
		}
	}
	return v4 && v6, nil
}
