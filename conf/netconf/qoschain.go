package netconf

import "github.com/netclass-dev/netclass/conf/field"

// QoSChain configures netclass-qos, the chained plugin that applies the qos
// block to the interface a previous plugin created.
type QoSChain struct {
	Common
}

// ParseQoSChain decodes and validates a netclass-qos configuration. The
// caller checks prevResult, which only ADD and CHECK need.
func ParseQoSChain(data []byte) (*QoSChain, error) {
	c := &QoSChain{}
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := invalid(TypeQoS, c.validate()); err != nil {
		return nil, err
	}
	c.Raw = data
	c.finish()
	return c, nil
}

func (c *QoSChain) validate() field.Errors {
	errs := c.Common.validate()
	errs.Append(c.withoutHostPort("by netclass-qos (the main plugin guards its own ports)"))
	if !c.IPAM.IsEmpty() {
		errs.Add("ipam", "netclass-qos does not allocate addresses: put ipam on the plugin before it in the chain")
	}
	return errs
}
