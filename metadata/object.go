package metadata

// isReferenceType reports whether a field of type t references another
// object by its reference.
func isReferenceType(t string) bool {
	switch t {
	case "lookup", "master_detail", "tree":
		return true
	}
	return false
}

// primaryDatasource is the datasource every node has built in: an object
// in it names no datasource item.
const primaryDatasource = "default"

// object: fields is a map of field name to field; lookup, master_detail
// and tree fields reference an object, a roll-up summary its child object;
// the object's datasource (other than the primary "default") is a
// reference; built-in list views bind objects like a view's do.
func (p *parser) object() error {
	var o Object // Refs leaves the item's Object out
	ds, err := p.root.name("datasource")
	if err != nil {
		return err
	}
	if ds != "" && ds != primaryDatasource {
		o.Datasource = ds
		p.refs.add(RefDatasource, ds)
	}
	es, err := p.root.mapOf("fields")
	if err != nil {
		return err
	}
	if len(es) > 0 && !p.refsOnly {
		o.Fields = make([]Field, 0, len(es))
	}
	for i := range es {
		f, err := p.field(&es[i])
		if err != nil {
			return err
		}
		if !p.refsOnly {
			o.Fields = append(o.Fields, f)
		}
	}
	if !p.refsOnly {
		p.item.Object = &Object{Datasource: o.Datasource, Fields: o.Fields}
	}
	return eachObject(p.root, "listViews", p.listView)
}

func (p *parser) field(e *entry) (Field, error) {
	fo, err := p.root.asMember(e, "fields")
	if err != nil {
		return Field{}, err
	}
	var f Field
	if !p.refsOnly {
		f.Name = e.key(p.root.src)
	}
	typ, ok, err := fo.fieldType()
	if err != nil {
		return Field{}, err
	}
	if !ok || blank(typ) {
		return Field{}, faultf(fo.at("type"), "is required")
	}
	f.Type = typ
	// A relationship field without a target is refused by the platform's
	// authoring schema but exists in rows written before that rule; it
	// names nothing, so there is nothing to resolve.
	ref, err := fo.name("reference")
	if err != nil {
		return Field{}, err
	}
	if ref != "" && isReferenceType(typ) {
		f.Reference = ref
		p.refs.add(RefObject, ref)
	}
	if sum, ok, err := fo.object("summaryOperations"); err != nil {
		return Field{}, err
	} else if ok {
		if err := p.named(sum, "object", RefObject); err != nil {
			return Field{}, err
		}
	}
	return f, nil
}

// fieldType reads a field's "type" like str, without allocating for the
// platform's common field types (a body has a type per field).
func (o *obj) fieldType() (string, bool, error) {
	raw, ok := o.get("type")
	if ok && len(raw) > 2 && raw[0] == '"' {
		if t, known := commonFieldType(raw[1 : len(raw)-1]); known {
			return t, true, nil
		}
	}
	return o.str("type")
}

// commonFieldType returns the constant for the common field type b (the
// conversion in a switch does not allocate).
func commonFieldType(b []byte) (string, bool) {
	switch string(b) {
	case "text":
		return "text", true
	case "textarea":
		return "textarea", true
	case "number":
		return "number", true
	case "currency":
		return "currency", true
	case "percent":
		return "percent", true
	case "select":
		return "select", true
	case "boolean":
		return "boolean", true
	case "date":
		return "date", true
	case "datetime":
		return "datetime", true
	case "lookup":
		return "lookup", true
	case "master_detail":
		return "master_detail", true
	case "email":
		return "email", true
	case "phone":
		return "phone", true
	case "url":
		return "url", true
	}
	return "", false
}
