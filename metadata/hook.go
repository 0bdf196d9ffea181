package metadata

// hook: object names the hook's target, one object or several; it is
// required, and an empty target is refused rather than read as every
// object ("*" says that explicitly).
func (p *parser) hook() error {
	path := p.root.at("object")
	if !p.root.has("object") {
		return faultf(path, "is required")
	}
	raw, _ := p.root.get("object")
	var names []string
	if raw[0] == '[' {
		elems := elements(raw)
		if len(elems) == 0 {
			return faultf(path, "must name at least one object")
		}
		names = make([]string, len(elems))
		for i, e := range elems {
			if e[0] != '"' {
				return faultf(index(path, i), "must be a string, not %s", kindOf(e))
			}
			names[i] = unquote(e)
		}
	} else {
		s, _, err := p.root.str("object")
		if err != nil {
			return faultf(path, "must be a string or an array of strings, not %s", kindOf(raw))
		}
		names = []string{s}
	}
	for _, n := range names {
		if blank(n) {
			return faultf(path, "must name at least one object")
		}
		if n != wildcard {
			p.refs.add(RefObject, n)
		}
	}
	return nil
}
