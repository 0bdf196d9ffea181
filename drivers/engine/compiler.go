package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/objectstack-fleet/reconciler/internal/canonjson"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Options configure a Compiler.
type Options struct {
	// Logger; default discards.
	Logger *slog.Logger
}

// Compiler materializes engine entries. It is safe for concurrent use.
type Compiler struct {
	log *slog.Logger
}

var _ reconcile.Materializer = (*Compiler)(nil)

// New returns a Compiler. It does no I/O.
func New(opts Options) *Compiler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Compiler{log: log}
}

// Item is a compiled metadata item: the engine registry's live instance.
type Item struct {
	Type string
	Name string
	// Body is the item's metadata JSON object as stored.
	Body json.RawMessage
	// Fields are an object's fields (nil for other types).
	Fields []Field
	// Objects are the objects the item references, deduplicated, in order
	// of appearance (may include an object's own name).
	Objects []string
	// Datasource is the datasource an object names ("" if none).
	Datasource string
	// Refs are the registry entries the loop resolved the references to.
	Refs []registry.Ref
}

// Close does nothing: a compiled item holds no resources.
func (*Item) Close() error { return nil }

// ErrChecksum is the cause of a checksum mismatch failure.
var ErrChecksum = errors.New("checksum mismatch")

// Materialize compiles d. A body of the wrong shape or a checksum that does
// not match is reconcile.Invalid naming the fault.
func (c *Compiler) Materialize(ctx context.Context, d reconcile.Desired) (registry.Instance, error) {
	typ, name := splitKey(d.Key)
	body := d.Body
	checksum := ""
	if md := d.Metadata; md != nil {
		typ, name, checksum = md.Type, md.Name, md.Checksum
		if len(md.Metadata) > 0 {
			body = md.Metadata
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, reconcile.Transient(err, "compile interrupted: %v", err)
	}
	it, err := Compile(typ, name, body)
	if err != nil {
		return nil, err
	}
	if checksum != "" {
		if err := verifyChecksum(body, checksum); err != nil {
			return nil, err
		}
	}
	it.Refs = d.Refs
	c.log.DebugContext(ctx, "compiled metadata item", slog.String("kind", string(d.Kind)),
		slog.String("key", d.Key), slog.Int64("revision", d.Revision), slog.Int("references", len(it.Objects)))
	return it, nil
}

// Compile validates body as an item of type typ called name and returns it
// compiled. Faults are reconcile.Invalid naming the offending member
// ("fields[2].type must be a string"). It does not resolve references and
// does not check a checksum.
func Compile(typ, name string, body json.RawMessage) (*Item, error) {
	sh, err := decode(typ, body)
	if err != nil {
		return nil, reconcile.Invalid(err, "%s", err.Error())
	}
	return &Item{
		Type:       typ,
		Name:       name,
		Body:       append(json.RawMessage(nil), body...),
		Fields:     sh.fields,
		Objects:    sh.objects,
		Datasource: sh.datasource,
	}, nil
}

// References returns what an item of type typ with body refers to: the
// objects (view.object, flow.trigger.object, permission.object, an object's
// field references; deduplicated, in order of appearance, an object's own
// name included when it references itself) and an object's datasource
// ("" if none). A body of the wrong shape returns the same
// reconcile.Invalid error Compile would. It is pure: the loop calls it to
// resolve dependencies before materializing.
func References(typ string, body json.RawMessage) (objects []string, datasource string, err error) {
	it, err := Compile(typ, "", body)
	if err != nil {
		return nil, "", err
	}
	return it.Objects, it.Datasource, nil
}

// VerifyChecksum reports whether checksum ("sha256:<hex>") is the checksum
// of body's canonical JSON; a mismatch is reconcile.Invalid
// "checksum mismatch".
func VerifyChecksum(body json.RawMessage, checksum string) error {
	return verifyChecksum(body, checksum)
}

func verifyChecksum(body json.RawMessage, checksum string) error {
	sum, err := canonjson.Checksum(body)
	if err != nil {
		return reconcile.Invalid(err, "checksum mismatch: body is not canonicalizable")
	}
	if !strings.EqualFold(sum, strings.TrimSpace(checksum)) {
		return reconcile.Invalid(ErrChecksum, "checksum mismatch")
	}
	return nil
}

// splitKey splits an engine key "type/name" or "org:type/name".
func splitKey(key string) (typ, name string) {
	if i := strings.IndexByte(key, ':'); i >= 0 && i < strings.IndexByte(key, '/') {
		key = key[i+1:]
	}
	typ, name, _ = strings.Cut(key, "/")
	return typ, name
}
