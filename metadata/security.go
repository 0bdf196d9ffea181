package metadata

import "strings"

// wildcard is the target that means every object: it names no item.
const wildcard = "*"

// permission: the keys of objects name objects; the keys of fields are
// "object.field" and name the object part. "*" grants every object and
// names none.
func (p *parser) permission() error {
	objs, err := p.root.mapOf("objects")
	if err != nil {
		return err
	}
	for _, e := range objs {
		if k := e.key(p.root.src); !blank(k) && k != wildcard {
			p.refs.add(RefObject, k)
		}
	}
	fields, err := p.root.mapOf("fields")
	if err != nil {
		return err
	}
	for _, e := range fields {
		k := e.key(p.root.src)
		o, _, ok := strings.Cut(k, ".")
		if !ok || blank(o) {
			return faultf(member(p.root.at("fields"), k), "must be named \"object.field\"")
		}
		if o != wildcard {
			p.refs.add(RefObject, o)
		}
	}
	return nil
}
