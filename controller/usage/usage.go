// Package usage answers which network objects the ResourceClaims use: the devices netclass
// publishes name their network in the ResourceSlices, and netclass-dra's status entry of an
// allocated device names it again (it outlives the device). The PodNetwork and Network
// reconcilers hold their objects' deletion on it (finalizer contract.FinalizerInUse).
package usage

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"github.com/netclass-dev/netclass/api/contract"
)

// Network names a network object: a PodNetwork (Namespace empty) or a Network.
type Network = types.NamespacedName

// deviceID names one device of a driver's pool, as allocation results do.
type deviceID struct{ pool, device string }

// Devices maps the devices netclass publishes to the network each one attaches to, from
// the device attributes of the driver's ResourceSlices.
type Devices map[deviceID]Network

// SliceDevices reads the network attributes of every netclass.dev device in slices:
// resource.kubernetes.io/podNetwork (the NetworkClass proposal), else
// netclass.dev/podNetwork (the Multi-Network DRA design), and
// resource.kubernetes.io/podNetworkNamespace for a namespaced network.
func SliceDevices(slices []*resourceapi.ResourceSlice) Devices {
	out := Devices{}
	for _, s := range slices {
		if s.Spec.Driver != contract.DriverName {
			continue
		}
		for _, d := range s.Spec.Devices {
			if n := deviceNetwork(d.Attributes); n.Name != "" {
				out[deviceID{s.Spec.Pool.Name, d.Name}] = n
			}
		}
	}
	return out
}

func deviceNetwork(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) Network {
	ns := stringAttr(attrs, contract.AttributeStdPodNetworkNamespace)
	for _, key := range []resourceapi.QualifiedName{
		contract.AttributeStdPodNetwork,
		contract.AttributePodNetwork,
		"podNetwork", // unqualified names are in the driver's own domain
	} {
		if v := stringAttr(attrs, key); v != "" {
			return Network{Namespace: ns, Name: v}
		}
	}
	return Network{}
}

func stringAttr(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, key resourceapi.QualifiedName) string {
	if a, ok := attrs[key]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// ClaimNetworks returns the networks an allocated claim uses through netclass.dev devices:
// each allocation result of the driver is resolved through the device's attributes in
// devices and through the claim's status entry for that device (data.podNetwork and
// data.podNetworkNamespace). Unallocated claims use nothing; other drivers are ignored.
func ClaimNetworks(claim *resourceapi.ResourceClaim, devices Devices) []Network {
	if claim.Status.Allocation == nil {
		return nil
	}
	allocated := map[deviceID]bool{}
	set := map[Network]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != contract.DriverName {
			continue
		}
		id := deviceID{r.Pool, r.Device}
		allocated[id] = true
		if n, ok := devices[id]; ok {
			set[n] = true
		}
	}
	for _, d := range claim.Status.Devices {
		if d.Driver != contract.DriverName || !allocated[deviceID{d.Pool, d.Device}] || d.Data == nil {
			continue
		}
		var data contract.ClaimStatusData
		if json.Unmarshal(d.Data.Raw, &data) == nil && data.PodNetwork != "" {
			set[Network{Namespace: data.PodNetworkNamespace, Name: data.PodNetwork}] = true
		}
	}
	out := make([]Network, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Users maps each network to the sorted "namespace/name" keys of the claims using it.
func Users(claims []*resourceapi.ResourceClaim, devices Devices) map[Network][]string {
	out := map[Network][]string{}
	for _, c := range claims {
		key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}.String()
		for _, n := range ClaimNetworks(c, devices) {
			out[n] = append(out[n], key)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// maxListed bounds how many claims a condition message names.
const maxListed = 5

// InUse says whether a network is in use, from the claims using it, and the message of its
// InUse condition. The message names the claims only while the object is being deleted
// (which they hold): otherwise it stays the same while claims come and go, so pods starting
// and stopping do not each cost a status write.
func InUse(users []string, deleting bool) (bool, string) {
	switch {
	case len(users) == 0:
		return false, "no ResourceClaim is allocated a device of this network"
	case !deleting:
		return true, "ResourceClaims are allocated devices of this network"
	}
	listed := strings.Join(users, ", ")
	if len(users) > maxListed {
		listed = strings.Join(users[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(users)-maxListed)
	}
	return true, fmt.Sprintf("deletion waits until no ResourceClaim or generated NetworkAttachmentDefinition uses the network; used by %d: %s", len(users), listed)
}

// NADs tells which generated NetworkAttachmentDefinitions of a network exist
// ("<namespace>/<name>" a Network, "<name>" a PodNetwork; controller/nad's
// Generated). A deleted network's NAD stays while a pod attached through it
// names it: the network stays too, with its segment.
type NADs interface {
	Of(network string) (nads []string, known bool)
	// Notify registers f, called with the networks whose NADs changed, or
	// nil for every network.
	Notify(f func(networks []string))
}

// NADUsers are what a deleted network's generated NADs count as among its
// users: each NAD, or one entry saying they are not known yet (nil nads:
// none counted).
func NADUsers(nads NADs, network string) []string {
	if nads == nil {
		return nil
	}
	keys, known := nads.Of(network)
	if !known {
		return []string{"NetworkAttachmentDefinitions (not listed yet)"}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = "NetworkAttachmentDefinition " + k
	}
	return out
}

// Requeue is what a reconciler of one kind (namespaced: Networks, else
// PodNetworks) registers with NADs.Notify: add queues the networks of its
// kind among those named, or, when every network may have changed, those
// deleting returns.
func Requeue(namespaced bool, deleting func() []string, add func(key string)) func(networks []string) {
	return func(networks []string) {
		if networks == nil {
			networks = deleting()
		}
		for _, k := range networks {
			if strings.Contains(k, "/") == namespaced {
				add(k)
			}
		}
	}
}

// DeletingKeys are the keys ("<namespace>/<name>", or "<name>") of the
// objects being deleted.
func DeletingKeys[T metav1.Object](objs []T) []string {
	var keys []string
	for _, o := range objs {
		if o.GetDeletionTimestamp() != nil {
			keys = append(keys, key(Network{Namespace: o.GetNamespace(), Name: o.GetName()}))
		}
	}
	return keys
}

// key is a network's queue key: "<namespace>/<name>", or "<name>" for a
// PodNetwork (NamespacedName.String would give "/<name>").
func key(n Network) string {
	if n.Namespace == "" {
		return n.Name
	}
	return n.String()
}

// keysOf are the queue keys of the networks of one kind among ns:
// "<namespace>/<name>" of Networks (namespaced), else PodNetworks' names.
func keysOf(ns []Network, namespaced bool) []string {
	var keys []string
	for _, n := range ns {
		if (n.Namespace != "") == namespaced {
			keys = append(keys, key(n))
		}
	}
	return keys
}

// SliceKeys are the queue keys of the networks of one kind that a
// ResourceSlice's netclass.dev devices name (an event handler's object).
func SliceKeys(obj any, namespaced bool) []string {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return nil
	}
	var ns []Network
	for _, n := range SliceDevices([]*resourceapi.ResourceSlice{s}) {
		ns = append(ns, n)
	}
	return keysOf(ns, namespaced)
}

// ClaimKeys are the queue keys of the networks of one kind an allocated
// claim (an event handler's object) uses, and the claim (nil: not one).
func ClaimKeys(obj any, devices func() Devices, namespaced bool) ([]string, *resourceapi.ResourceClaim) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return nil, nil
	}
	return keysOf(ClaimNetworks(claim, devices()), namespaced), claim
}

// DevicesOf reads the devices of the ResourceSlices a lister has (none when
// it fails).
func DevicesOf(slices resourcelisters.ResourceSliceLister) Devices {
	all, err := slices.List(labels.Everything())
	if err != nil {
		return Devices{}
	}
	return SliceDevices(all)
}
