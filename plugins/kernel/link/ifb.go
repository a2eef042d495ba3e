package link

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// CreateIFB creates an up IFB device (the target of redirected ingress
// traffic) in the link group (0: none; PortGroup: the port's it serves) and
// returns it. An existing IFB of that name is reused.
func CreateIFB(name string, mtu int, alias string, group uint32) (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU, attrs.Flags, attrs.Group = name, mtu, net.FlagUp, group
	var l netlink.Link = &netlink.Ifb{LinkAttrs: attrs}
	err := netlink.LinkAdd(l)
	if err != nil && !errors.Is(err, syscall.EEXIST) {
		return nil, fmt.Errorf("create ifb %q: %w", name, err)
	}
	if err != nil || l.Attrs().Index == 0 { // an existing one, or netlink's lookup after creating failed
		if l, err = ByName(name); err != nil {
			return nil, err
		}
		if _, ok := l.(*netlink.Ifb); !ok {
			return nil, fmt.Errorf("link %q exists and is a %s, not an ifb", name, l.Type())
		}
	}
	// Up again (not all kernels honour IFF_UP on creation for ifb), with
	// the alias (which the kernel ignores on creation), in one request.
	var change []*nl.RtAttr
	if alias != "" {
		change = append(change, nl.NewRtAttr(unix.IFLA_IFALIAS, []byte(alias)))
	}
	if err := setLink(l, true, change...); err != nil {
		return nil, fmt.Errorf("set ifb %q up with its alias: %w", name, err)
	}
	return l, nil
}

// DeleteIFB removes the named IFB. A link that is gone is success; one of
// that name that is no IFB is not netclass's and stays.
func DeleteIFB(name string) error {
	l, err := netlink.LinkByName(name)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find link %q: %w", name, err)
	}
	if _, ok := l.(*netlink.Ifb); !ok {
		return nil
	}
	if err := netlink.LinkDel(l); err != nil && !IsNotFound(err) {
		return fmt.Errorf("delete ifb %q: %w", name, err)
	}
	return nil
}
