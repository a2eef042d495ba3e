// Package bwshare keeps a network's shared scheduler on a node: one HTB
// tree on the network's VXLAN device (plugins/kernel/tc Share) whose root
// is the network's capacity, a class per attachment with an allocation
// (rate = its guarantee, ceil = its ceiling) and a best-effort class for
// everything else, with the nftables table that classifies every frame the
// device sends by its source MAC (plugins/kernel/nft ApplyShare).
//
// The attachments of a device are recorded in a file under the plugins'
// dataDir, written under the VNI's lock (which the caller holds): Join and
// Leave change it, drop the entries of host ends that no longer exist (a
// pod gone without its DEL), and make the kernel what the record says —
// level-triggered, so a Join after any failure repairs the tree. When the
// last attachment leaves, the tree, the table and the record go.
package bwshare

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// Entry is one attachment's class.
type Entry struct {
	MAC   string `json:"mac"`
	Minor uint16 `json:"minor"`
	// Rate and Ceil are bits/s.
	Rate int64 `json:"rate"`
	Ceil int64 `json:"ceil"`
}

// Record is what a device's tree holds: its capacity (bits/s, the last
// joining attachment's) and the attachments' classes by host end.
type Record struct {
	Capacity int64            `json:"capacity"`
	Ports    map[string]Entry `json:"ports"`
}

// Port is an attachment joining the tree.
type Port struct {
	HostIf, MAC string
	// Rate (its guarantee) and Ceil are bits/s; Rate 0 is best effort.
	Rate, Ceil int64
}

// firstMinor is the first leaf class's minor (1 is the root class).
const firstMinor = 2

// Add puts p in the record (a port already there keeps its class), with
// capacity the network's. A best-effort port has no class of its own: it
// is removed. It fails when every minor is taken.
func (r *Record) Add(capacity int64, p Port) error {
	r.Capacity = capacity
	if r.Ports == nil {
		r.Ports = map[string]Entry{}
	}
	if p.Rate <= 0 {
		delete(r.Ports, p.HostIf)
		return nil
	}
	e, ok := r.Ports[p.HostIf]
	if !ok {
		minor, err := r.freeMinor()
		if err != nil {
			return fmt.Errorf("class for host end %q: %w", p.HostIf, err)
		}
		e.Minor = minor
	}
	e.MAC, e.Rate, e.Ceil = p.MAC, p.Rate, max(p.Ceil, p.Rate)
	r.Ports[p.HostIf] = e
	return nil
}

func (r *Record) freeMinor() (uint16, error) {
	used := map[uint16]bool{}
	for _, e := range r.Ports {
		used[e.Minor] = true
	}
	for m := uint16(firstMinor); m < tc.ShareDefaultMinor; m++ {
		if !used[m] {
			return m, nil
		}
	}
	return 0, errors.New("every class of the shared scheduler is taken")
}

// Prune drops the ports exists says are gone, and returns them sorted.
func (r *Record) Prune(exists func(hostIf string) bool) []string {
	var gone []string
	for h := range r.Ports {
		if !exists(h) {
			gone = append(gone, h)
			delete(r.Ports, h)
		}
	}
	slices.Sort(gone)
	return gone
}

// Render is the record's tree and classification: the Share (bytes/s) and
// each port's MAC to its class id. The best-effort class is guaranteed
// what the allocations leave of the capacity (at least tc.MinShareBytes).
func Render(r Record) (tc.Share, map[string]uint32) {
	s := tc.Share{CapacityBytes: uint64(r.Capacity / 8)}
	classes := map[string]uint32{}
	var sum int64
	for _, h := range slices.Sorted(maps.Keys(r.Ports)) {
		e := r.Ports[h]
		sum += e.Rate
		s.Classes = append(s.Classes, tc.ShareClass{Minor: e.Minor, RateBytes: uint64(e.Rate / 8), CeilBytes: uint64(min(max(e.Ceil, e.Rate), r.Capacity) / 8)})
		classes[e.MAC] = tc.ShareClassID(e.Minor)
	}
	s.DefaultBytes = uint64(max(r.Capacity-sum, 0) / 8)
	return s, classes
}

// path is the record of dev under dataDir.
func path(dataDir, dev string) string { return filepath.Join(dataDir, "bandwidth-share", dev+".json") }

// load reads dev's record; none is an empty one.
func load(dataDir, dev string) (Record, error) {
	var r Record
	data, err := os.ReadFile(path(dataDir, dev))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read the shared scheduler record of %q: %w", dev, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, fmt.Errorf("decode the shared scheduler record of %q: %w", dev, err)
	}
	return r, nil
}

// save writes dev's record atomically, or removes it when it is empty.
func save(dataDir, dev string, r Record) error {
	p := path(dataDir, dev)
	if len(r.Ports) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the shared scheduler record of %q: %w", dev, err)
		}
		return nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the shared scheduler record of %q: %w", dev, err)
	}
	tmp := p + ".tmp"
	if err := attach.InDir(filepath.Dir(p), func() error { return os.WriteFile(tmp, data, 0o600) }); err != nil {
		return fmt.Errorf("write the shared scheduler record of %q: %w", dev, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write the shared scheduler record of %q: %w", dev, err)
	}
	return nil
}
