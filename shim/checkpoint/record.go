// Package checkpoint keeps netclass-dra's state on disk so that a restarted
// (or SIGKILLed) daemon loses nothing: one file per prepared ResourceClaim,
// written atomically (temporary file, fsync, rename, fsync of the directory),
// so a file is always either the old or the new record, never a torn one.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/conf/strictjson"
	"github.com/netclass-dev/netclass/shim/attachment"
)

// Version is the record format written. Decode also reads the formats listed
// in migrations, upgrading them in memory (the next write stores Version);
// any other version is refused, and Open sets the record aside.
//
//	1: the first format.
//	2: attachments carry attachedAt, when ADD was started for them.
//	3: devices carry qos, the attachment's own qos block (the rule agent adds
//	   the NetworkQoS rules to it); a device of an older record has none,
//	   and the agent leaves its attachments as ADD made them.
const Version = 3

// migrations upgrade a decoded record of an older version by one step.
var migrations = map[int]func(*Claim){
	1: func(c *Claim) { c.Version = 2 }, // attachedAt is unknown for older attachments
	2: func(c *Claim) { c.Version = 3 }, // the devices' qos is unknown
}

// Claim is what Prepare recorded for one ResourceClaim.
type Claim struct {
	Version   int       `json:"version"`
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Pods are the pods the claim was reserved for at Prepare.
	Pods []Pod `json:"pods"`
	// Devices are the claim's allocated devices of this driver on this node.
	Devices    []Device  `json:"devices"`
	PreparedAt time.Time `json:"preparedAt"`
}

// Pod is a consumer of the claim.
type Pod struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Order is the claim's position in the pod's spec.resourceClaims; it
	// orders the automatic interface names net1, net2, …
	Order int `json:"order"`
}

// Device is one allocated device and the attachment it stands for.
type Device struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// ShareID is the allocation's share of a shared device ("" otherwise).
	ShareID string                `json:"shareID,omitempty"`
	Network attachment.NetworkRef `json:"network"`
	// InterfaceName is the configured name ("" = automatic netN).
	InterfaceName string `json:"interfaceName,omitempty"`
	// MAC and IPs are static values handed to the plugins as capability arguments.
	MAC string   `json:"mac,omitempty"`
	IPs []string `json:"ips,omitempty"`
	// DeviceID is the SR-IOV VF (PCI address) of the device, handed to the
	// plugin as the "deviceID" capability argument.
	DeviceID string `json:"deviceID,omitempty"`
	// ConfList is the rendered CNI configuration list.
	ConfList json.RawMessage `json:"confList"`
	// Bandwidth is what the scheduler allocated to the claim on the device
	// (consumedCapacity "bandwidth", bits/s; 0: none), the ceiling of the
	// attachment's egress already folded into QoS.Base.
	Bandwidth int64 `json:"bandwidth,omitempty"`
	// QoS is the attachment's own qos (version 3; nil in migrated records).
	QoS *DeviceQoS `json:"qos,omitempty"`
	// Attachments are the CNI attachments made for the claim's pods.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// DeviceQoS is what the rule agent builds an attachment's rules on.
type DeviceQoS struct {
	// Base is the network's qos block with the claim's merged over it,
	// under the ceiling of the claim's allocated bandwidth (nil: none); the
	// NetworkQoS rules selecting the pod come on top.
	Base *qos.Spec `json:"base,omitempty"`
}

// State of an attachment.
type State string

const (
	// Adding is written before CNI ADD runs: after a crash, such an attachment
	// is either adopted from libcni's result cache or deleted.
	Adding State = "Adding"
	// Attached: ADD succeeded; Result holds what it returned.
	Attached State = "Attached"
)

// Attachment is one interface in one pod sandbox.
type Attachment struct {
	PodUID    types.UID `json:"podUID"`
	SandboxID string    `json:"sandboxID"`
	NetNS     string    `json:"netns"`
	IfName    string    `json:"ifName"`
	State     State     `json:"state"`
	Result    *Result   `json:"result,omitempty"`
	// AttachedAt is when ADD was started (version 2; nil in migrated records).
	AttachedAt *time.Time `json:"attachedAt,omitempty"`
}

// Result is what CNI ADD reported for the pod's interface.
type Result struct {
	InterfaceName string   `json:"interfaceName"`
	MAC           string   `json:"mac,omitempty"`
	IPs           []string `json:"ips,omitempty"`
}

// Encode serialises a record.
func Encode(c *Claim) ([]byte, error) {
	c.Version = Version
	out, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint of claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return out, nil
}

// Decode parses and checks a record, reporting every problem.
func Decode(raw []byte) (*Claim, error) {
	c := &Claim{}
	if err := strictjson.Decode(raw, c); err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	for c.Version != Version {
		migrate, ok := migrations[c.Version]
		if !ok {
			break // validate names the version
		}
		migrate(c)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("checkpoint of claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return c, nil
}

func (c *Claim) validate() error {
	var errs []error
	if c.Version != Version {
		errs = append(errs, fmt.Errorf("version %d, this netclass-dra reads versions 1 to %d", c.Version, Version))
	}
	if c.UID == "" || c.Namespace == "" || c.Name == "" {
		errs = append(errs, errors.New("uid, namespace and name are required"))
	}
	for i, d := range c.Devices {
		if d.Device == "" || d.Pool == "" {
			errs = append(errs, fmt.Errorf("devices[%d]: pool and device are required", i))
		}
		if !json.Valid(d.ConfList) {
			errs = append(errs, fmt.Errorf("devices[%d]: confList is not JSON", i))
		}
		for j, a := range d.Attachments {
			if a.PodUID == "" || a.SandboxID == "" || a.IfName == "" {
				errs = append(errs, fmt.Errorf("devices[%d].attachments[%d]: podUID, sandboxID and ifName are required", i, j))
			}
			if a.State != Adding && a.State != Attached {
				errs = append(errs, fmt.Errorf("devices[%d].attachments[%d]: unknown state %q", i, j, a.State))
			}
		}
	}
	return errors.Join(errs...)
}

// HasPod reports whether the claim was reserved for the pod.
func (c *Claim) HasPod(uid types.UID) bool {
	for _, p := range c.Pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// Attachment returns the attachment of a device for a sandbox, if any.
func (d *Device) Attachment(sandboxID string) (*Attachment, bool) {
	for i := range d.Attachments {
		if d.Attachments[i].SandboxID == sandboxID {
			return &d.Attachments[i], true
		}
	}
	return nil, false
}

// SetAttachment replaces the attachment of the same sandbox or appends it.
func (d *Device) SetAttachment(a Attachment) {
	if cur, ok := d.Attachment(a.SandboxID); ok {
		*cur = a
		return
	}
	d.Attachments = append(d.Attachments, a)
}

// RemoveAttachment drops the attachment of a sandbox.
func (d *Device) RemoveAttachment(sandboxID string) {
	out := d.Attachments[:0]
	for _, a := range d.Attachments {
		if a.SandboxID != sandboxID {
			out = append(out, a)
		}
	}
	d.Attachments = out
}
