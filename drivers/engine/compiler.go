package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Options configure a Compiler.
type Options struct {
	// Logger; default discards.
	Logger *slog.Logger
	// Limits caps body size and references per item; zero fields mean
	// metadata's defaults.
	Limits metadata.Limits
}

// Compiler materializes engine entries. It is safe for concurrent use.
type Compiler struct {
	log *slog.Logger
	lim metadata.Limits
}

var _ reconcile.Materializer = (*Compiler)(nil)

// New returns a Compiler. It does no I/O.
func New(opts Options) *Compiler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Compiler{log: log, lim: opts.Limits}
}

// Item is a compiled metadata item: the engine registry's live instance.
type Item struct {
	Type string
	Name string
	// Bytes is the length of the body compiled. The body itself is not
	// kept: the store has it, and a registry of large items would hold
	// every one of them for good.
	Bytes int
	// Refs are what the body references (metadata.Parse's order: by kind,
	// then name; an object's own name included when it references itself).
	Refs []metadata.Reference
	// Fields are an object's fields in body order (nil for other types).
	Fields []metadata.Field
	// Datasource is the datasource an object lives in ("" for the
	// primary one).
	Datasource string
	// Resolved are the registry entries the loop resolved Refs to.
	Resolved []registry.Ref
}

// Close does nothing: a compiled item holds no resources.
func (*Item) Close() error { return nil }

// Materialize compiles d. A body of the wrong shape, above a cap, or whose
// checksum does not match is reconcile.Invalid naming the fault; the cause
// is a *metadata.Fault (errors.Is metadata.ErrInvalid, and
// metadata.ErrChecksum for a mismatch).
func (c *Compiler) Materialize(ctx context.Context, d reconcile.Desired) (registry.Instance, error) {
	typ, name := splitKey(d.Key)
	body := d.Body
	checksum := ""
	if md := d.Metadata; md != nil {
		typ, name, checksum = md.Type, md.Name, md.Checksum
	}
	if err := ctx.Err(); err != nil {
		return nil, reconcile.Transient(err, "compile interrupted: %v", err)
	}
	it, err := compile(typ, name, body, c.lim)
	if err != nil {
		return nil, err
	}
	if err := metadata.VerifyChecksum(body, checksum); err != nil {
		return nil, reconcile.Invalid(err, "%s: %s", err.Error(), metadata.ChecksumRemedy(d.Metadata.ID, d.Revision))
	}
	it.Resolved = d.Refs
	c.log.DebugContext(ctx, "compiled metadata item", slog.String("kind", string(d.Kind)),
		slog.String("key", d.Key), slog.Int64("revision", d.Revision), slog.Int("references", len(it.Refs)))
	return it, nil
}

// Compile validates body as an item of type typ called name with the
// default limits and returns it compiled. A fault is reconcile.Invalid
// naming the offending member ("fields.owner.reference must be a string,
// not a number"). It resolves no reference and checks no checksum.
func Compile(typ, name string, body json.RawMessage) (*Item, error) {
	return compile(typ, name, body, metadata.Limits{})
}

func compile(typ, name string, body json.RawMessage, lim metadata.Limits) (*Item, error) {
	md, err := metadata.Parse(typ, name, body, lim)
	if err != nil {
		return nil, reconcile.Invalid(err, "%s", err.Error())
	}
	it := &Item{
		Type:  typ,
		Name:  name,
		Bytes: len(body),
		Refs:  md.Refs,
	}
	if md.Object != nil {
		it.Fields, it.Datasource = md.Object.Fields, md.Object.Datasource
	}
	return it, nil
}

// VerifyChecksum checks body against its stored checksum ("" is not
// checked); a mismatch is reconcile.Invalid "checksum mismatch".
func VerifyChecksum(body json.RawMessage, checksum string) error {
	if err := metadata.VerifyChecksum(body, checksum); err != nil {
		return reconcile.Invalid(err, "%s", err.Error())
	}
	return nil
}

// splitKey reads type and name from an engine key
// "[org:]type/name[@package]" whose segments are percent-encoded. It is
// the fallback for a Desired without its row.
func splitKey(key string) (typ, name string) {
	if i := strings.IndexByte(key, ':'); i >= 0 && i < strings.IndexByte(key, '/') {
		key = key[i+1:]
	}
	typ, name, _ = strings.Cut(key, "/")
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	return unescape(typ), unescape(name)
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}
