// Package nri is netclass-dra's NRI plugin: when containerd runs a pod
// sandbox it executes CNI ADD for the pod's prepared attachments inside NRI's
// time budget, DEL when the sandbox stops or is removed, reconciles its
// checkpoint with the sandboxes the runtime reports after every (re)connect,
// runs CNI GC with the valid attachments once at start, and reconnects when
// containerd restarts.
package nri

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// Step is one attachment to make for a pod.
type Step struct {
	Claim     *checkpoint.Claim
	DeviceIdx int
	Pod       checkpoint.Pod
	IfName    string
	// Warnings are what the plugins warned of while attaching (cni.Result).
	Warnings []string
	// CNI is the time its ADD took (zero: made before).
	CNI time.Duration
}

// Device returns the step's device record.
func (s Step) Device() *checkpoint.Device { return &s.Claim.Devices[s.DeviceIdx] }

// Plan lists the attachments a pod needs, in the order of the pod's resource
// claims, and names their interfaces: a configured name is kept, the others
// get net1, net2, … in that order, skipping configured names. Two devices
// configured with one name are an error.
func Plan(claims []*checkpoint.Claim, pod types.UID) ([]Step, error) {
	return PlanAround(claims, pod, nil)
}

// PlanAround is Plan in a pod whose namespace already holds interfaces
// another CNI caller made (Multus's net1…, the primary's eth0): the
// automatic names skip them too, and a configured name among them is an
// error, so a claim attachment never takes (nor, failing, removes) an
// interface it does not own.
func PlanAround(claims []*checkpoint.Claim, pod types.UID, others map[string]bool) ([]Step, error) {
	var steps []Step
	taken := map[string]string{}
	for _, e := range podEntries(claims, pod) {
		for i, d := range e.claim.Devices {
			steps = append(steps, Step{Claim: e.claim, DeviceIdx: i, Pod: e.pod, IfName: d.InterfaceName})
			if d.InterfaceName == "" {
				continue
			}
			who := fmt.Sprintf("claim %s request %s", e.claim.Name, d.Request)
			if prev, dup := taken[d.InterfaceName]; dup {
				return nil, fmt.Errorf("interface name %s is configured twice in the pod: %s and %s", d.InterfaceName, prev, who)
			}
			if others[d.InterfaceName] { // its rollback would remove what another caller made
				return nil, fmt.Errorf("interface name %s of %s is taken in the pod by an interface netclass-dra did not make", d.InterfaceName, who)
			}
			taken[d.InterfaceName] = who
		}
	}
	if len(steps) > contract.MaxInterfacesPerPod {
		return nil, fmt.Errorf("the pod's claims ask for %d interfaces; a pod gets at most %d", len(steps), contract.MaxInterfacesPerPod)
	}
	next := 1
	for i := range steps {
		if steps[i].IfName != "" {
			continue
		}
		for taken[fmt.Sprintf("net%d", next)] != "" || others[fmt.Sprintf("net%d", next)] {
			next++
		}
		steps[i].IfName = fmt.Sprintf("net%d", next)
		taken[steps[i].IfName] = "automatic"
	}
	return steps, nil
}

// podEntry is a claim of the pod, with the pod as the claim records it.
type podEntry struct {
	claim *checkpoint.Claim
	pod   checkpoint.Pod
}

// podEntries are the pod's claims in the order the pod lists them (then by
// namespace and name).
func podEntries(claims []*checkpoint.Claim, pod types.UID) []podEntry {
	var entries []podEntry
	for _, c := range claims {
		for _, p := range c.Pods {
			if p.UID == pod {
				entries = append(entries, podEntry{c, p})
				break
			}
		}
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.pod.Order != b.pod.Order {
			return a.pod.Order < b.pod.Order
		}
		return a.claim.Namespace+"/"+a.claim.Name < b.claim.Namespace+"/"+b.claim.Name
	})
	return entries
}
