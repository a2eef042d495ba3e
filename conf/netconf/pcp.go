package netconf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/netclass-dev/netclass/conf/field"
)

// The 802.1p priority (PCP) of frames leaving through a VLAN's
// sub-interface comes from their IP packet's DSCP, through a map of the 64
// DSCP values. By default PCP = DSCP >> 3: the class selector (the DSCP's
// top three bits, RFC 2474), so CS5 and EF (40, 46) give 5, AF4x (34-38)
// 4, CS1 (8) 1, best effort 0. The pcpMap option replaces the map whole.
const (
	NumDSCP = 64
	MaxPCP  = 7
)

// PCPTable is a DSCP-to-PCP map in kernel order: PCP of DSCP d at [d].
type PCPTable [NumDSCP]uint8

// DefaultPCPTable is PCP = DSCP >> 3.
func DefaultPCPTable() PCPTable {
	var t PCPTable
	for d := range t {
		t[d] = uint8(d >> 3)
	}
	return t
}

// PCPMap is the pcpMap option as written: a JSON object from a DSCP value
// (its decimal form, "0" to "63") to a PCP (0 to 7), kept in order with
// every key, repeated ones included, so validation can refuse them.
type PCPMap struct {
	Entries []PCPEntry
}

// PCPEntry is one key of pcpMap and its value.
type PCPEntry struct {
	DSCP string
	PCP  json.Number
}

// UnmarshalJSON reads the object key by key.
func (m *PCPMap) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[map[string]int](), Field: "pcpMap"}
	}
	m.Entries = nil
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		n, ok := v.(json.Number)
		if !ok { // kept as written: validation names the key and refuses it
			raw, _ := json.Marshal(v)
			n = json.Number(raw)
		}
		m.Entries = append(m.Entries, PCPEntry{DSCP: tok.(string), PCP: n})
	}
	_, err := dec.Token()
	return err
}

// jsonKind names the kind of a JSON value for a type error.
func jsonKind(b []byte) string {
	switch t := bytes.TrimSpace(b); {
	case len(t) == 0:
		return "nothing"
	case t[0] == '[':
		return "array"
	case t[0] == '"':
		return "string"
	case t[0] == 't' || t[0] == 'f':
		return "bool"
	}
	return "number"
}

// MarshalJSON writes the object in order.
func (m PCPMap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range m.Entries {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.DSCP)
		fmt.Fprintf(&b, "%s:%s", k, e.PCP)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Table validates the map and returns it in kernel order; a DSCP value it
// leaves out gets PCP 0. Every problem is reported, under p.
func (m *PCPMap) Table(p field.Path) (PCPTable, field.Errors) {
	var t PCPTable
	var errs field.Errors
	if len(m.Entries) > NumDSCP {
		errs.Add(p, "at most %d entries (one per DSCP value), got %d", NumDSCP, len(m.Entries))
	}
	seen := map[int]bool{}
	for _, e := range m.Entries {
		kp := field.Path(fmt.Sprintf("%s[%q]", p, e.DSCP))
		d, err := strconv.Atoi(e.DSCP)
		switch {
		case err != nil || strconv.Itoa(d) != e.DSCP || d < 0 || d >= NumDSCP:
			errs.Add(kp, "the key must be a DSCP value, a decimal number from 0 to %d", NumDSCP-1)
			continue
		case seen[d]:
			errs.Add(kp, "is given twice")
			continue
		}
		seen[d] = true
		v, err := strconv.Atoi(string(e.PCP))
		if err != nil || v < 0 || v > MaxPCP {
			errs.Add(kp, "must be a PCP from 0 to %d, got %s", MaxPCP, e.PCP)
			continue
		}
		t[d] = uint8(v)
	}
	return t, errs
}
