package link_test

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/test/nstest"
)

// DeletePort removes a port's veth pair and its IFB in one request, and
// nothing of another port; a veth outside its port's group (made before link
// groups) is left to device-by-device deletion.
func TestDeletePort(t *testing.T) {
	host, pod := nstest.New(t), nstest.New(t)
	podFd := pod.Fd(t)
	makePort := func(name string, grouped bool) {
		host.Do(t, func() error {
			h, err := link.CreateVeth(link.VethPair{HostName: name, PodName: name + "p", PodNSFd: podFd, MTU: 1500})
			if err != nil {
				return err
			}
			group := link.PortGroup(h.Attrs().Index)
			if !grouped {
				group = 0
				if err := netlink.LinkSetGroup(h, 0); err != nil {
					return err
				}
			}
			_, err = link.CreateIFB(name+"q", 1500, "", group)
			return err
		})
	}
	makePort("nca", true)
	makePort("ncb", true)
	makePort("ncold", false)
	deleted := func(name string) (ok bool) {
		host.Do(t, func() (err error) { ok, err = link.DeletePort(name); return err })
		return ok
	}
	if !deleted("nca") {
		t.Fatal("DeletePort(nca) did not delete a grouped port")
	}
	for name, want := range map[string]bool{"nca": false, "ncaq": false, "ncb": true, "ncbq": true, "ncold": true, "ncoldq": true} {
		if got := host.HasLink(t, name); got != want {
			t.Errorf("host link %s present = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]bool{"ncap": false, "ncbp": true} {
		if got := pod.HasLink(t, name); got != want {
			t.Errorf("pod link %s present = %v, want %v", name, got, want)
		}
	}
	if deleted("ncold") || !host.HasLink(t, "ncold") {
		t.Error("DeletePort deleted (or claimed to) a port outside its group")
	}
	if deleted("nca") {
		t.Error("DeletePort of a deleted port reported a deletion")
	}
}
