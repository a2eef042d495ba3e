package netspec

// OwnerIndex answers Owner for many holders against one list: a node
// deciding every network it offers asks for each, and tenants may create
// Networks by the ten thousand (each Owner call scans the whole list).
// Building it is linear; each answer looks at a few precomputed firsts.
type OwnerIndex struct {
	firsts map[segmentKey]*firstTwo
}

// segmentKey groups holders whose segments overlap: one VNI, one bridge,
// one VLAN ID on one master ("" = a master left to each node), or, with
// anyMaster, every master of one VLAN ID.
type segmentKey struct {
	kind      string
	id        int
	device    string
	anyMaster bool
}

// firstTwo are the first two holders of a group by before: the first one
// that is not the asking holder itself is among them.
type firstTwo struct{ a, b *Holder }

func (f *firstTwo) add(h *Holder) {
	switch {
	case f.a == nil || h.before(*f.a):
		f.a, f.b = h, f.a
	case f.b == nil || h.before(*f.b):
		f.b = h
	}
}

// NewOwnerIndex indexes all (which Owner takes as all).
func NewOwnerIndex(all []Holder) *OwnerIndex {
	x := &OwnerIndex{firsts: map[segmentKey]*firstTwo{}}
	for i := range all {
		s := all[i].Segment
		if s.Kind == "" {
			continue
		}
		keys := []segmentKey{{kind: s.Kind, id: s.ID, device: s.Device}}
		if s.Kind == SegmentVLAN {
			keys = append(keys, segmentKey{kind: s.Kind, id: s.ID, anyMaster: true})
		}
		for _, k := range keys {
			f := x.firsts[k]
			if f == nil {
				f = &firstTwo{}
				x.firsts[k] = f
			}
			f.add(&all[i])
		}
	}
	return x
}

// Owner is Owner(h, all) for the indexed all.
func (x *OwnerIndex) Owner(h Holder) *Holder {
	s := h.Segment
	var keys []segmentKey
	switch {
	case s.Kind == "":
		return nil
	case s.Kind == SegmentVLAN && s.Device == "": // overlaps every master
		keys = []segmentKey{{kind: s.Kind, id: s.ID, anyMaster: true}}
	case s.Kind == SegmentVLAN:
		keys = []segmentKey{{kind: s.Kind, id: s.ID, device: s.Device}, {kind: s.Kind, id: s.ID}}
	default:
		keys = []segmentKey{{kind: s.Kind, id: s.ID, device: s.Device}}
	}
	var owner *Holder
	for _, k := range keys {
		f := x.firsts[k]
		if f == nil {
			continue
		}
		for _, o := range []*Holder{f.a, f.b} {
			if o == nil || o.same(h) || !o.before(h) {
				continue
			}
			if owner == nil || o.before(*owner) {
				owner = o
			}
		}
	}
	return owner
}
