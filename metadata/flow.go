package metadata

import "strings"

// maxFlowDepth bounds how deep flow regions (loop bodies, parallel
// branches, try/catch blocks) may nest.
const maxFlowDepth = 32

// crudNodes are the node types whose config.objectName (or its alias
// object) names the object they read or write.
var crudNodes = map[string]bool{"get_record": true, "create_record": true, "update_record": true, "delete_record": true}

// flow: the start node's config.objectName binds a record-triggered flow to
// its object; the record nodes and object-form screens name the objects
// they use. Nodes nested in regions (a config member holding {nodes}, or
// an array of them) count too. A name holding a "{token}" template is
// resolved at run time and names no item.
func (p *parser) flow() error { return p.nodes(p.root, 0) }

func (p *parser) nodes(g obj, depth int) error {
	if depth > maxFlowDepth {
		return faultf(g.path(), "nests flow regions deeper than %d", maxFlowDepth)
	}
	elems, err := g.array("nodes")
	if err != nil {
		return err
	}
	path := g.at("nodes")
	for i, raw := range elems {
		n, err := g.asObject(raw, index(path, i))
		if err != nil {
			return err
		}
		typ, _, err := n.str("type")
		if err != nil {
			return err
		}
		cfg, ok, err := n.object("config")
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if err := p.flowObject(cfg, "objectName"); err != nil {
			return err
		}
		if crudNodes[typ] && !cfg.has("objectName") {
			if err := p.flowObject(cfg, "object"); err != nil {
				return err
			}
		}
		if err := p.regions(cfg, depth); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) flowObject(cfg obj, key string) error {
	s, err := cfg.name(key)
	if err != nil {
		return err
	}
	if s != "" && !strings.Contains(s, "{") {
		p.refs.add(RefObject, s)
	}
	return nil
}

// regions walks the config members of a node that hold nested graphs.
func (p *parser) regions(cfg obj, depth int) error {
	es := dedupe(cfg.src, cfg.es)
	for j := range es {
		key, raw := es[j].key(cfg.src), es[j].value(cfg.src)
		switch kindOf(raw) {
		case "an object":
			g, err := cfg.asMember(&es[j], cfg.path())
			if err != nil {
				return err
			}
			if g.has("nodes") {
				if err := p.nodes(g, depth+1); err != nil {
					return err
				}
			}
		case "an array":
			for i, e := range elements(raw) {
				if kindOf(e) != "an object" {
					continue
				}
				g, err := cfg.asObject(e, index(cfg.at(key), i))
				if err != nil {
					return err
				}
				if g.has("nodes") {
					if err := p.nodes(g, depth+1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}
