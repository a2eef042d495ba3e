package qosport

import (
	"errors"
	"fmt"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// syncHostIngress brings the rules of a routed veth (its host end in no
// bridge: upstream ptp, Calico) to the plan at its host end's netfilter
// ingress hook (nft.HostIngressTable), where the pod cannot reach them and
// a meter's drop is no error on the pod's socket, and removes the pod's
// table of the interface if it has one. When something hooks the host
// end's ingress in tc (an ingress or clsact qdisc: the bandwidth plugin's
// redirection to an IFB, a BPF dataplane), which runs first and may
// redirect the packets past that hook, the rules stay in the pod at the
// interface's egress (syncPod), as for netclass's own routed veths, and the
// host end's table goes.
func syncHostIngress(a Attachment, plan *qos.Plan) (bool, error) {
	host, err := link.ByName(a.HostIf)
	if err != nil {
		return false, err
	}
	hooked, err := tc.HasIngressHook(host)
	if err != nil {
		return false, err
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return false, err
	}
	if hooked {
		gone, err := nft.SyncHostIngressQoS(c, a.HostIf, nil)
		changed, perr := syncPod(a, plan)
		return changed || gone, errors.Join(err, perr)
	}
	changed, err := nft.SyncHostIngressQoS(c, a.HostIf, plan)
	if err != nil {
		return changed, fmt.Errorf("update the rules of %q on %q: %w", a.IfName, a.HostIf, err)
	}
	found, err := podHasTable(a)
	if err != nil || !found {
		return changed, err
	}
	_, err = syncPod(a, nil)
	return true, err
}

func podHasTable(a Attachment) (bool, error) {
	var found bool
	err := nft.InNamespace(a.PodNS, func(c *nftables.Conn) error {
		var err error
		found, err = nft.HasAnyPodQoS(c, a.IfName)
		return err
	})
	return found, err
}

// RemoveStaleHostRules deletes the rules of every host end the host holds
// rules of but that no longer exists (a pod deleted while netclass-dra
// was down, whose DEL or agent never removed them), and returns their
// names. A host end's rules are never installed before the host end
// exists, so one that is missing is gone for good.
func RemoveStaleHostRules() ([]string, error) {
	c, err := nft.OpenCurrent()
	if err != nil {
		return nil, err
	}
	ends, err := nft.HostEnds(c)
	if err != nil {
		return nil, err
	}
	var stale []string
	var errs []error
	for _, h := range ends {
		_, err := link.ByName(h)
		if !link.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		if err := RemovePortRules(h); err != nil {
			errs = append(errs, err)
			continue
		}
		stale = append(stale, h)
	}
	return stale, errors.Join(errs...)
}
