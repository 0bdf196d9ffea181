package metadata

// view: a view item binds its object; so do the data sources of the views
// it holds (list, form, listViews.*, formViews.*), of a view item's config,
// and of a flat view's own data.
func (p *parser) view() error {
	if err := p.named(p.root, "object", RefObject); err != nil {
		return err
	}
	if err := p.data(p.root); err != nil {
		return err
	}
	for _, key := range [...]string{"list", "form", "config"} {
		v, ok, err := p.root.object(key)
		if err != nil {
			return err
		}
		if ok {
			if err := p.listView(v); err != nil {
				return err
			}
		}
	}
	for _, key := range [...]string{"listViews", "formViews"} {
		if err := eachObject(p.root, key, p.listView); err != nil {
			return err
		}
	}
	return nil
}

// listView reads one list or form view: its data source binds an object.
func (p *parser) listView(v obj) error { return p.data(v) }

// data reads v.data, a view data source: the "object" provider (also the
// default when provider is unset) names an object.
func (p *parser) data(v obj) error {
	d, ok, err := v.object("data")
	if err != nil || !ok {
		return err
	}
	provider, _, err := d.str("provider")
	if err != nil {
		return err
	}
	if provider != "" && provider != "object" {
		return nil
	}
	return p.named(d, "object", RefObject)
}
