package metadata

// Parse validates body as the stored metadata of an item of type typ called
// name, and lists what it references. A fault is a *Fault (errors.Is
// ErrInvalid) naming the member at fault; nothing is resolved here.
//
// Parse checks the members it reads: those that name other items and the
// containers holding them must have the platform's types (an object's
// fields are a map of name to field, a hook names its object). Every other
// member is the platform's business and accepted as written. Its cost is
// linear in the body, which lim bounds along with the number of distinct
// references.
func Parse(typ, name string, body []byte, lim Limits) (*Item, error) {
	return parse(typ, name, body, lim, true)
}

// Refs is Parse for a caller that needs only what an item references and
// whether it is desired, given a body it has already proved to be valid
// JSON (canonicalizing it does): it skips the validation pass and leaves
// an object's Object out of the Item (a field costs an allocation). body
// must be valid JSON.
func Refs(typ, name string, body []byte, lim Limits) (*Item, error) {
	return parse(typ, name, body, lim, false)
}

// parse is Parse; without validate, Refs.
func parse(typ, name string, body []byte, lim Limits, validate bool) (*Item, error) {
	lim = lim.withDefaults()
	if err := lim.CheckBody(int64(len(body))); err != nil {
		return nil, err
	}
	a := getArena()
	defer putArena(a)
	root, err := decodeBody(body, a, validate)
	if err != nil {
		return nil, err
	}
	p := parser{root: root, item: Item{Type: typ, Name: name, Desired: true}, refsOnly: !validate}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if n := len(p.refs.all()); n > lim.MaxRefs {
		return nil, tooManyRefs(n, lim.MaxRefs)
	}
	return p.refs.item(p.item), nil
}

// parser holds one Parse call's state.
type parser struct {
	root obj
	item Item // without Refs, which refs collects
	refs refSet
	// refsOnly leaves an object's fields out of the item (Refs).
	refsOnly bool
}

func (p *parser) parse() error {
	switch p.item.Type {
	case "object":
		return p.object()
	case "view":
		return p.view()
	case "hook":
		return p.hook()
	case "permission":
		return p.permission()
	case "flow":
		return p.flow()
	case "dataset":
		return p.named(p.root, "object", RefObject)
	case "page":
		return p.named(p.root, "object", RefObject)
	case "action":
		return p.named(p.root, "objectName", RefObject)
	case "report":
		return p.report()
	case "connector":
		return p.connector()
	case "datasource":
		return p.datasource()
	}
	return nil // any other type: a JSON object, no references
}

// named adds the reference member key of o holds, if it holds a name.
func (p *parser) named(o obj, key string, kind RefKind) error {
	s, err := o.name(key)
	if s != "" {
		p.refs.add(kind, s)
	}
	return err
}

// report: a report binds a dataset, itself or per block.
func (p *parser) report() error {
	if err := p.named(p.root, "dataset", RefDataset); err != nil {
		return err
	}
	blocks, err := p.root.array("blocks")
	if err != nil {
		return err
	}
	for i, raw := range blocks {
		b, err := p.root.asObject(raw, index(p.root.at("blocks"), i))
		if err != nil {
			return err
		}
		if err := p.named(b, "dataset", RefDataset); err != nil {
			return err
		}
	}
	return nil
}

// eachObject calls fn for every value of the map member key of o, each of
// which must be a JSON object.
func eachObject(o obj, key string, fn func(obj) error) error {
	es, err := o.mapOf(key)
	if err != nil {
		return err
	}
	path := o.at(key)
	for i := range es {
		v, err := o.asMember(&es[i], path)
		if err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}
