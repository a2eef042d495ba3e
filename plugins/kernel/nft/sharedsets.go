package nft

import (
	"hash/maphash"

	"github.com/google/nftables"
)

// sharedSets finds, among a ruleset's sets that allows may share, the one
// of a key type holding exactly some elements: by a hash of the elements,
// then compared, so that a port of a tenant's 1,000 allows costs time
// linear in its elements, not a comparison with every earlier set. Sets
// are found by their elements, not by how they were rendered, so that a
// rendering with the sync's element cache and one without it (CHECK) name
// the same sets. The zero value is ready to use.
type sharedSets struct {
	seed maphash.Seed
	at   map[uint64][]int // hash -> indexes into the ruleset's sets
}

// find returns the shared set of the key type holding exactly els (nil if
// none) and the hash to add one under.
func (ss *sharedSets) find(sets []setWithElements, key nftables.SetDatatype, els []nftables.SetElement) (*nftables.Set, uint64) {
	if ss.at == nil {
		ss.seed, ss.at = maphash.MakeSeed(), map[uint64][]int{}
	}
	h := ss.hash(key, els)
	for _, i := range ss.at[h] {
		if s := sets[i]; s.set.KeyType == key && sameInOrder(s.elements, els) {
			return s.set, h
		}
	}
	return nil, h
}

// add appends sw to sets, shared under h (find's), and returns them.
func (ss *sharedSets) add(sets []setWithElements, h uint64, sw setWithElements) []setWithElements {
	ss.at[h] = append(ss.at[h], len(sets))
	return append(sets, sw)
}

func (ss *sharedSets) hash(key nftables.SetDatatype, els []nftables.SetElement) uint64 {
	var h maphash.Hash
	h.SetSeed(ss.seed)
	h.WriteString(key.Name)
	for _, e := range els {
		flag := byte(len(e.Key))
		if e.IntervalEnd {
			flag |= 0x80
		}
		h.WriteByte(flag)
		h.Write(e.Key)
	}
	return h.Sum64()
}
