package sriov

import (
	"encoding/json"
	"fmt"

	"github.com/netclass-dev/netclass/plugins/attach"
)

// state is what an attachment's record keeps (Record.Extra), written before
// anything is changed: which VF it holds, and what DEL puts back.
type state struct {
	PCI       string `json:"pciAddress"`
	PF        string `json:"pf"`
	VFIndex   int    `json:"vfIndex"`
	Userspace bool   `json:"userspace,omitempty"`
	// Netdev is the VF netdev's identity on the host (kernel mode).
	Netdev *netdevState `json:"netdev,omitempty"`
	// VF holds the original PF-side settings of what ADD changes.
	VF *vfState `json:"vf,omitempty"`
}

func stateOf(r *attach.Record) (*state, error) {
	st := &state{}
	if err := json.Unmarshal(r.Extra, st); err != nil {
		return nil, fmt.Errorf("record of %s/%s: sr-iov state: %w", r.ContainerID, r.IfName, err)
	}
	if st.PCI == "" {
		return nil, fmt.Errorf("record of %s/%s names no VF", r.ContainerID, r.IfName)
	}
	return st, nil
}

func (st *state) encode() (json.RawMessage, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode state of VF %s: %w", st.PCI, err)
	}
	return b, nil
}
