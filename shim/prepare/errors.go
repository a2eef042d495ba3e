package prepare

import (
	"fmt"

	"github.com/netclass-dev/netclass/shim/attachment"
)

// DeviceError is why one allocated device of a claim could not be
// prepared: the claim's status reports it on that device, with its own
// reason, and not on the claim's other devices.
type DeviceError struct {
	Device string
	Err    error
}

func (e *DeviceError) Error() string { return e.Err.Error() }

func (e *DeviceError) Unwrap() error { return e.Err }

// FailedDevice names the device (shim/status reads it).
func (e *DeviceError) FailedDevice() string { return e.Device }

// NamespaceError refuses a namespaced network to a claim of another namespace.
type NamespaceError struct {
	Claim   string
	Network attachment.NetworkRef
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("claim %s cannot use %s: a namespaced network is only usable by claims of its own namespace (%s)",
		e.Claim, e.Network, e.Network.Namespace)
}

// Reason is the claim status condition reason of the error.
func (e *NamespaceError) Reason() string { return "NamespaceMismatch" }

// NotOfferedError: the allocated device is no longer published on this node.
type NotOfferedError struct{ Device, Request string }

func (e *NotOfferedError) Error() string {
	return fmt.Sprintf("device %s of request %s is not offered on this node: its network was disabled, is not Ready or was deleted", e.Device, e.Request)
}

// Reason is the claim status condition reason of the error.
func (e *NotOfferedError) Reason() string { return "NetworkNotOffered" }
