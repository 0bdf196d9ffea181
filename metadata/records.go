package metadata

// The connector auth types.
const (
	AuthBearer = "bearer"
	AuthAPIKey = "api-key"
	AuthBasic  = "basic"
	AuthNone   = "none"
)

// connector: auth.type bearer, api-key or basic uses the credential named
// by auth.credentialRef; none (or no auth) uses none. enabled: false means
// the connector is not built.
func (p *parser) connector() error {
	c, err := connectorOf(&p.root)
	if err != nil {
		return err
	}
	p.item.Connector, p.item.Desired = c, c.Enabled
	if c.CredentialRef != "" {
		p.refs.add(RefCredential, c.CredentialRef)
	}
	return nil
}

// connectorOf reads the connector rule off root, a connector body.
func connectorOf(root *obj) (*Connector, error) {
	c := &Connector{AuthType: AuthNone}
	var err error
	if c.Enabled, err = root.boolean("enabled", true); err != nil {
		return nil, err
	}
	auth, ok, err := root.object("auth")
	if err != nil {
		return nil, err
	}
	if !ok {
		return c, nil
	}
	typ, ok, err := auth.str("type")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, faultf(auth.at("type"), "is required")
	}
	switch typ {
	case AuthNone:
		return c, nil
	case AuthBearer, AuthAPIKey, AuthBasic:
	default:
		return nil, faultf(auth.at("type"), "is %s, not one of bearer, api-key, basic or none", quote(typ))
	}
	c.AuthType = typ
	if c.CredentialRef, err = auth.name("credentialRef"); err != nil {
		return nil, err
	}
	if c.CredentialRef == "" {
		return nil, faultf(auth.at("credentialRef"), "is required for auth type %s", typ)
	}
	return c, nil
}

// datasource: a runtime datasource record. Its password comes from
// external.credentialsRef ("sys_secret:<id>" or a connector credential
// ref) or, when that is unset, from the connector named by
// external.connector. active: false means the pool is not built.
func (p *parser) datasource() error {
	d := &Datasource{}
	p.item.Datasource = d
	var err error
	if d.Active, err = p.root.boolean("active", true); err != nil {
		return err
	}
	p.item.Desired = d.Active
	if d.Driver, err = p.root.name("driver"); err != nil {
		return err
	}
	ext, ok, err := p.root.object("external")
	if err != nil || !ok {
		return err
	}
	if d.CredentialsRef, err = ext.name("credentialsRef"); err != nil {
		return err
	}
	if d.Connector, err = ext.name("connector"); err != nil {
		return err
	}
	switch {
	case d.CredentialsRef != "":
		p.refs.add(RefCredential, d.CredentialsRef)
	case d.Connector != "":
		p.refs.add(RefConnector, d.Connector)
	}
	return nil
}
