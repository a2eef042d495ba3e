// Package conformance implements the conformance checks of the NetworkClass
// proposal (its "Conformance Tests" section) as Go tests that any
// multi-network implementation can run against its cluster: give Run the
// NetworkClass, the DeviceClass selecting its devices, the DRA driver name and
// network objects of the class's kind, and it checks
//
//  1. ResourceSlice advertisement: every network object is advertised by at
//     least one device of the driver carrying resource.kubernetes.io/podNetwork
//     and resource.kubernetes.io/networkClass (and podNetworkNamespace for
//     namespaced kinds) that name the object and its class;
//  2. ResourceClaim network selection: a claim selecting a network with those
//     standard attributes is allocated by the scheduler for a pod, to a device
//     of the driver that is advertised for that network;
//  3. ResourceClaim network status: once the pod runs, the claim's status has
//     an entry for the allocated device with an interface name, and addresses
//     in CIDR form and a hardware address when reported — and, optionally,
//     the pod has that interface with those addresses.
//
// A ResourceSlice of a foreign driver whose device has none of these
// attributes is published during the run, as any real cluster may have one:
// DeviceClasses must guard their selectors (notes/k8s-testbed.md).
package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/testbed"
)

// NetworkClassGVR is the resource of NetworkClass objects.
var NetworkClassGVR = schema.GroupVersionResource{Group: "multinetwork.networking.k8s.io", Version: "v1", Resource: "networkclasses"}

// Cluster is where the suite runs.
type Cluster struct {
	Rest *rest.Config
	Kube kubernetes.Interface
	// Node is the node pods run on (the suite pins them to it).
	Node string
}

// Implementation is the multi-network implementation under test.
type Implementation struct {
	// Driver is the DRA driver that advertises the networks.
	Driver string
	// NetworkClass names an existing NetworkClass.
	NetworkClass string
	// DeviceClass names a DeviceClass that selects the class's devices.
	DeviceClass string
	// Networks are objects of the class's kind to create. Namespaced ones are
	// created in the suite's namespace (their namespace is overwritten).
	Networks []*unstructured.Unstructured
	// Pod returns the pod to run in a namespace; the suite adds the claim
	// and pins it to the node. Default: testbed.Pod sleeping for an hour.
	Pod func(namespace, name string) *corev1.Pod
	// CheckInPod runs `ip -o addr show dev <interface>` in the pod's first
	// container and compares with the reported status (needs ip and cat in
	// the image, as busybox has).
	CheckInPod bool
	// Timeout bounds each wait (default 2 minutes).
	Timeout time.Duration
	// Setup, when set, runs with the suite's namespace before the networks
	// are created (per-namespace prerequisites of an implementation).
	Setup func(t *testing.T, namespace string)
}

// Run runs the checks for every network of the implementation.
func Run(t *testing.T, c Cluster, impl Implementation) {
	t.Helper()
	if impl.Timeout == 0 {
		impl.Timeout = 2 * time.Minute
	}
	if impl.Pod == nil {
		impl.Pod = func(ns, name string) *corev1.Pod { return testbed.Pod(ns, name, "sleep", "3600") }
	}
	s, err := newSuite(t, c, impl)
	if err != nil {
		t.Fatal(err)
	}
	s.foreignSlice(t)
	ns := testbed.Namespace(t, c.Kube)
	if impl.Setup != nil {
		impl.Setup(t, ns)
	}
	for i, obj := range impl.Networks {
		net := s.create(t, ns, obj)
		t.Run(fmt.Sprintf("%s/%s", s.kind, net.name), func(t *testing.T) { s.runNetwork(t, ns, net, i) })
	}
}

type suite struct {
	c          Cluster
	impl       Implementation
	dyn        dynamic.Interface
	kind       string
	gvr        schema.GroupVersionResource
	namespaced bool
}

// network is one created network object.
type network struct {
	namespace, name string
}

func newSuite(t *testing.T, c Cluster, impl Implementation) (*suite, error) {
	dyn, err := dynamic.NewForConfig(c.Rest)
	if err != nil {
		return nil, err
	}
	ctx := testbed.Context(t, time.Minute)
	nc, err := dyn.Resource(NetworkClassGVR).Get(ctx, impl.NetworkClass, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get NetworkClass %s: %w", impl.NetworkClass, err)
	}
	group, _, _ := unstructured.NestedString(nc.Object, "spec", "group")
	version, _, _ := unstructured.NestedString(nc.Object, "spec", "version")
	kind, _, _ := unstructured.NestedString(nc.Object, "spec", "kind")
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	m, err := mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}, version)
	if err != nil {
		return nil, fmt.Errorf("NetworkClass %s names %s/%s %s, which the API server does not serve: %w", impl.NetworkClass, group, version, kind, err)
	}
	return &suite{c: c, impl: impl, dyn: dyn, kind: kind, gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

func (s *suite) create(t *testing.T, ns string, obj *unstructured.Unstructured) network {
	t.Helper()
	obj = obj.DeepCopy()
	ri := dynamic.ResourceInterface(s.dyn.Resource(s.gvr))
	if s.namespaced {
		obj.SetNamespace(ns)
		ri = s.dyn.Resource(s.gvr).Namespace(ns)
	}
	ctx := testbed.Context(t, time.Minute)
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", s.kind, obj.GetName(), err)
	}
	name := created.GetName()
	if !s.namespaced { // namespaced ones go with the namespace
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.impl.Timeout)
			defer cancel()
			if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", s.kind, name, err)
			}
		})
	}
	return network{namespace: created.GetNamespace(), name: name}
}

func (s *suite) runNetwork(t *testing.T, ns string, net network, i int) {
	var advertised []Advertised
	ok := t.Run("ResourceSliceAdvertisement", func(t *testing.T) {
		advertised = s.waitAdvertised(t, net)
	})
	if !ok {
		t.FailNow()
	}
	claimName := fmt.Sprintf("conformance-%d", i)
	podName := fmt.Sprintf("conformance-%d", i)
	var result resourceapi.DeviceRequestAllocationResult
	ok = t.Run("ResourceClaimNetworkSelection", func(t *testing.T) {
		result = s.selectNetwork(t, ns, net, claimName, podName, advertised)
	})
	if !ok {
		t.FailNow()
	}
	t.Run("ResourceClaimNetworkStatus", func(t *testing.T) {
		s.checkStatus(t, ns, net, claimName, podName, result, advertised)
	})
}

// Advertised is a device of the driver that advertises a network.
type Advertised struct {
	Slice, Pool, Device string
	// Node is the node of the device's slice ("" when the slice is not tied
	// to one node).
	Node string
}

// FindAdvertised lists the devices of driver in the cluster's ResourceSlices
// whose standard attributes name the network of the class.
func FindAdvertised(ctx context.Context, kube kubernetes.Interface, driver, class, namespace, name string) ([]Advertised, error) {
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + driver})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of driver %s: %w", driver, err)
	}
	var out []Advertised
	for _, sl := range list.Items {
		for _, d := range sl.Spec.Devices {
			if attr(d, contract.AttributeStdPodNetwork) == name && attr(d, contract.AttributeStdNetworkClass) == class &&
				(namespace == "" || attr(d, contract.AttributeStdPodNetworkNamespace) == namespace) {
				out = append(out, Advertised{Slice: sl.Name, Pool: sl.Spec.Pool.Name, Device: d.Name, Node: ptr.Deref(sl.Spec.NodeName, "")})
			}
		}
	}
	return out, nil
}

func attr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// waitAdvertised waits until the network is advertised by a device the
// suite's pods can get: one of a slice of the node they are pinned to, or of a
// slice not tied to a node (on a cluster of several nodes, the other nodes'
// devices may come first).
func (s *suite) waitAdvertised(t *testing.T, net network) []Advertised {
	var found []Advertised
	what := fmt.Sprintf("a device of driver %s advertising %s %s/%s of NetworkClass %s for node %s", s.impl.Driver, s.kind, net.namespace, net.name, s.impl.NetworkClass, s.c.Node)
	testbed.Poll(t, testbed.Context(t, s.impl.Timeout), 200*time.Millisecond, what, func(ctx context.Context) (bool, string, error) {
		var err error
		found, err = FindAdvertised(ctx, s.c.Kube, s.impl.Driver, s.impl.NetworkClass, net.namespace, net.name)
		if err != nil {
			return false, err.Error(), nil
		}
		onNode := slices.ContainsFunc(found, func(a Advertised) bool { return a.Node == "" || a.Node == s.c.Node })
		return onNode, fmt.Sprintf("%d devices: %+v", len(found), found), nil
	})
	return found
}

// SelectorFor is the CEL selector of a claim request choosing a network by
// the standard attributes, in the seed's bare form: the DeviceClass must
// have admitted only devices that have them.
func SelectorFor(class, namespace, name string) string {
	sel := fmt.Sprintf(`device.attributes["resource.kubernetes.io"].networkClass == %q && device.attributes["resource.kubernetes.io"].podNetwork == %q`, class, name)
	if namespace != "" {
		sel += fmt.Sprintf(` && device.attributes["resource.kubernetes.io"].podNetworkNamespace == %q`, namespace)
	}
	return sel
}

func (s *suite) selectNetwork(t *testing.T, ns string, net network, claimName, podName string, advertised []Advertised) resourceapi.DeviceRequestAllocationResult {
	ctx := testbed.Context(t, s.impl.Timeout)
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "network", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: s.impl.DeviceClass,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: SelectorFor(s.impl.NetworkClass, net.namespace, net.name)}}}}}}}}}
	if _, err := s.c.Kube.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaim: %v", err)
	}
	pod := s.impl.Pod(ns, podName)
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": s.c.Node}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "network", ResourceClaimName: ptr.To(claimName)}}
	if _, err := s.c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var result resourceapi.DeviceRequestAllocationResult
	testbed.Poll(t, ctx, 200*time.Millisecond, "claim "+claimName+" allocated", func(ctx context.Context) (bool, string, error) {
		c, err := s.c.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if c.Status.Allocation == nil {
			return false, "not allocated; pod events: " + testbed.Events(ctx, s.c.Kube, ns, podName), nil
		}
		r, err := AllocatedTo(c, s.impl.Driver, advertised)
		if err != nil {
			return false, "", err
		}
		result = r
		return true, "", nil
	})
	return result
}

// AllocatedTo checks that the claim's allocation holds a device of the driver
// that is one of the advertised devices, and returns that result.
func AllocatedTo(c *resourceapi.ResourceClaim, driver string, advertised []Advertised) (resourceapi.DeviceRequestAllocationResult, error) {
	if c.Status.Allocation == nil {
		return resourceapi.DeviceRequestAllocationResult{}, fmt.Errorf("claim %s/%s is not allocated", c.Namespace, c.Name)
	}
	var got []string
	for _, r := range c.Status.Allocation.Devices.Results {
		got = append(got, r.Driver+"/"+r.Pool+"/"+r.Device)
		if r.Driver != driver {
			continue
		}
		for _, a := range advertised {
			if a.Pool == r.Pool && a.Device == r.Device {
				return r, nil
			}
		}
	}
	return resourceapi.DeviceRequestAllocationResult{}, fmt.Errorf("claim %s/%s is allocated %v, none of them a device of %s advertising the network (%+v)",
		c.Namespace, c.Name, got, driver, advertised)
}

func (s *suite) checkStatus(t *testing.T, ns string, net network, claimName, podName string, r resourceapi.DeviceRequestAllocationResult, advertised []Advertised) {
	testbed.WaitForPodRunning(t, s.c.Kube, ns, podName, s.impl.Timeout)
	var entry resourceapi.AllocatedDeviceStatus
	testbed.Poll(t, testbed.Context(t, s.impl.Timeout), 200*time.Millisecond, "status of claim "+claimName, func(ctx context.Context) (bool, string, error) {
		c, err := s.c.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		e, err := StatusEntry(c, r)
		if err != nil {
			return false, err.Error(), nil
		}
		entry = e
		return true, "", nil
	})
	if err := CheckNetworkData(entry); err != nil {
		t.Fatal(err)
	}
	if _, err := AllocatedTo(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Driver: entry.Driver, Pool: entry.Pool, Device: entry.Device}}}}}},
		s.impl.Driver, advertised); err != nil {
		t.Fatalf("the status entry cannot be matched to a device advertising %s/%s: %v", net.namespace, net.name, err)
	}
	if s.impl.CheckInPod {
		s.checkInPod(t, ns, podName, entry.NetworkData)
	}
}

// StatusEntry returns the claim's status entry of the allocated device.
func StatusEntry(c *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) (resourceapi.AllocatedDeviceStatus, error) {
	for _, d := range c.Status.Devices {
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device && ptr.Deref(d.ShareID, "") == string(ptr.Deref(r.ShareID, "")) {
			return d, nil
		}
	}
	return resourceapi.AllocatedDeviceStatus{}, fmt.Errorf("claim %s/%s has no status entry for %s/%s/%s (share %v)", c.Namespace, c.Name, r.Driver, r.Pool, r.Device, ptr.Deref(r.ShareID, ""))
}

// CheckNetworkData checks that an entry identifies the attachment: an
// interface name, and well-formed addresses and hardware address.
func CheckNetworkData(e resourceapi.AllocatedDeviceStatus) error {
	nd := e.NetworkData
	if nd == nil {
		return fmt.Errorf("the status entry of %s has no networkData", e.Device)
	}
	var errs []error
	if nd.InterfaceName == "" {
		errs = append(errs, errors.New("networkData.interfaceName is empty"))
	}
	for _, ip := range nd.IPs {
		if _, err := netip.ParsePrefix(ip); err != nil {
			errs = append(errs, fmt.Errorf("networkData.ips: %q is not in CIDR form", ip))
		}
	}
	if nd.HardwareAddress != "" {
		if _, err := net.ParseMAC(nd.HardwareAddress); err != nil {
			errs = append(errs, fmt.Errorf("networkData.hardwareAddress %q: %w", nd.HardwareAddress, err))
		}
	}
	return errors.Join(errs...)
}

func (s *suite) checkInPod(t *testing.T, ns, pod string, nd *resourceapi.NetworkDeviceData) {
	ctx := testbed.Context(t, time.Minute)
	p, err := s.c.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	container := p.Spec.Containers[0].Name
	out, stderr, err := testbed.Exec(ctx, s.c.Rest, ns, pod, container, "ip", "-o", "addr", "show", "dev", nd.InterfaceName)
	if err != nil {
		t.Fatalf("the pod has no interface %s as its claim reports: %v %s", nd.InterfaceName, err, stderr)
	}
	for _, ip := range nd.IPs {
		if !strings.Contains(out, " "+ip+" ") {
			t.Errorf("the pod's %s does not have %s:\n%s", nd.InterfaceName, ip, out)
		}
	}
	if nd.HardwareAddress != "" {
		mac, _, err := testbed.Exec(ctx, s.c.Rest, ns, pod, container, "cat", "/sys/class/net/"+nd.InterfaceName+"/address")
		if err != nil || !strings.EqualFold(strings.TrimSpace(mac), nd.HardwareAddress) {
			t.Errorf("the pod's %s has hardware address %q (%v), the claim reports %s", nd.InterfaceName, strings.TrimSpace(mac), err, nd.HardwareAddress)
		}
	}
}

// ForeignDriver publishes the foreign slice.
const ForeignDriver = "foreign.conformance.example.com"

func (s *suite) foreignSlice(t *testing.T) {
	ctx := testbed.Context(t, time.Minute)
	name := fmt.Sprintf("conformance-foreign-%d", time.Now().UnixNano())
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{Driver: ForeignDriver, NodeName: ptr.To(s.c.Node),
			Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "accel0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				ForeignDriver + "/model": {StringValue: ptr.To("x")}}}}}}
	created, err := s.c.Kube.ResourceV1().ResourceSlices().Create(ctx, sl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the foreign driver's ResourceSlice: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.c.Kube.ResourceV1().ResourceSlices().Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete foreign ResourceSlice: %v", err)
		}
	})
}
