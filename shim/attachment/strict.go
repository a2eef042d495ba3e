package attachment

import (
	"bytes"
	"encoding/json"
	"net/netip"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
)

// keyTree is the keys of a JSON object, each with the tree of its value
// (for a list, of its elements); nil: a value without keys of its own.
type keyTree map[string]keyTree

// qosKeys are the keys of the qos block at every level (conf/qos.Spec).
var qosKeys = keyTree{
	"ingressRate": nil, "ingressBurst": nil, "egressRate": nil, "egressBurst": nil, "dscp": nil, "queue": nil,
	"egress": {
		"priority": nil, "dscp": nil,
		"classifier": {
			"to":    {"ipBlock": {"cidr": nil, "except": nil}},
			"ports": {"protocol": nil, "port": nil},
		},
		"bandwidth": {"rate": nil, "burst": nil},
	},
}

// exactQoSKeys checks the keys of the qos block at every level the way
// exactKeys checks the AttachmentConfig's own: spelt exactly (Go's decoder
// would take "DSCP" or "dſcp" for dscp) and given once. The admission policy
// of conf/deploy, which sees decoded objects, refuses the same keys; values
// of the wrong type are left to the typed decoding.
func exactQoSKeys(raw []byte) error {
	var errs field.Errors
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := walkKeys(dec, "qos", qosKeys, &errs); err != nil {
		return nil // not JSON of the expected shape: the typed decoding reports it
	}
	return errs.Err()
}

// walkKeys reads one value from dec, checking the keys of its objects against tree.
func walkKeys(dec *json.Decoder, p field.Path, tree keyTree, errs *field.Errors) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := t.(string)
			sub, known := tree[key]
			switch {
			case seen[key]:
				errs.Add(p.Child(key), "is given twice")
			case !known:
				errs.Add(p.Child(key), "is not a field (fields are case-sensitive)")
			}
			seen[key] = true
			if err := walkKeys(dec, p.Child(key), sub, errs); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, p.Index(i), tree, errs); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// mappedCIDRs refuses IPv4-mapped IPv6 addresses in the qos block's
// destinations, as the Kubernetes CEL library (and so the admission policy)
// does: written that way they are a mistake for the IPv4 network.
func mappedCIDRs(s *qos.Spec) []error {
	var errs []error
	for i, r := range s.Egress {
		for j, peer := range r.Classifier.To {
			if peer.IPBlock == nil {
				continue
			}
			p := field.Path("qos").Child("egress").Index(i).Child("classifier").Child("to").Index(j).Child("ipBlock")
			if isMapped(peer.IPBlock.CIDR) {
				errs = append(errs, field.Invalid(p.Child("cidr"), "%q is an IPv4-mapped IPv6 network: write the IPv4 network", peer.IPBlock.CIDR))
			}
			for k, ex := range peer.IPBlock.Except {
				if isMapped(ex) {
					errs = append(errs, field.Invalid(p.Child("except").Index(k), "%q is an IPv4-mapped IPv6 network: write the IPv4 network", ex))
				}
			}
		}
	}
	return errs
}

func isMapped(cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	return err == nil && p.Addr().Is4In6()
}
