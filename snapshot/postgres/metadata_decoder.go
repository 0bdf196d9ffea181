package postgres

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The PostgreSQL type OIDs of pgSelectMetadata's columns.
const (
	oidInt8        = 20
	oidInt4        = 23
	oidText        = 25
	oidFloat4      = 700
	oidVarchar     = 1043
	oidTimestamptz = 1184
)

// metadataColumns is what metadataDecoder expects of pgSelectMetadata's
// columns, in order: the type OIDs it accepts and whether the value must be
// in binary format (text columns read the same in either format).
var metadataColumns = [...]struct {
	oids   []uint32
	binary bool
}{
	{oids: []uint32{oidVarchar, oidText}},            // id
	{oids: []uint32{oidVarchar, oidText}},            // type
	{oids: []uint32{oidVarchar, oidText}},            // name
	{oids: []uint32{oidVarchar, oidText}},            // organization_id
	{oids: []uint32{oidVarchar, oidText}},            // package_id
	{oids: []uint32{oidVarchar, oidText}},            // state
	{oids: []uint32{oidVarchar, oidText}},            // metadata (the body)
	{oids: []uint32{oidFloat4}, binary: true},        // version
	{oids: []uint32{oidVarchar, oidText}},            // checksum
	{oids: []uint32{oidInt8}, binary: true},          // revision
	{oids: []uint32{oidTimestamptz}, binary: true},   // updated_at
	{oids: []uint32{oidInt4, oidInt8}, binary: true}, // withheld
}

// metadataStrings are the short text columns a row's strings are cut from.
var metadataStrings = [...]int{0, 1, 2, 3, 4, 5, 8}

// metadataDecoder reads pgSelectMetadata's rows from their wire values:
// a row's short text columns become substrings of one string and its body
// one []byte copy, instead of a Scan through a pointer per column (a
// relist of 100k rows spent most of its time allocating). A result in
// other formats than expected (another query exec mode) or a value it does
// not decode (a timestamp far from now) goes through scanMetadata, so rows
// and errors are the same either way.
type metadataDecoder struct {
	checked, raw bool
	buf          []byte
	// The last version decoded, by its bits: rows mostly share a few.
	versionBits uint32
	version     float64
}

// decode reads the current row of r into m, a zero MetadataRow.
func (d *metadataDecoder) decode(r pgx.CollectableRow, m *snapshot.MetadataRow) error {
	if !d.checked {
		d.checked, d.raw = true, rawMetadata(r.FieldDescriptions())
	}
	if d.raw && d.decodeRaw(r.RawValues(), m) {
		return nil
	}
	*m = snapshot.MetadataRow{}
	return scanMetadata(r, m)
}

// rawMetadata reports whether a result with these fields can be decoded
// by decodeRaw.
func rawMetadata(fds []pgconn.FieldDescription) bool {
	if len(fds) != len(metadataColumns) {
		return false
	}
	for i, c := range metadataColumns {
		oidOK := false
		for _, oid := range c.oids {
			oidOK = oidOK || fds[i].DataTypeOID == oid
		}
		if !oidOK || (c.binary && fds[i].Format != pgx.BinaryFormatCode) {
			return false
		}
	}
	return true
}

// decodeRaw decodes the wire values v of one row into m, or reports false
// (m partly written) for a value scanMetadata must read.
func (d *metadataDecoder) decodeRaw(v [][]byte, m *snapshot.MetadataRow) bool {
	if len(v) != len(metadataColumns) || v[0] == nil || len(v[9]) != 8 || len(v[10]) != 8 ||
		(v[7] != nil && len(v[7]) != 4) || (len(v[11]) != 4 && len(v[11]) != 8) {
		return false
	}
	at, ok := timestamptz(int64(binary.BigEndian.Uint64(v[10])))
	if !ok {
		return false
	}
	b := d.buf[:0]
	for _, i := range metadataStrings {
		b = append(b, v[i]...)
	}
	d.buf = b
	s, off := string(b), 0
	next := func(i int) string {
		off += len(v[i])
		return s[off-len(v[i]) : off]
	}
	m.ID, m.Type, m.Name, m.OrganizationID, m.PackageID, m.State = next(0), next(1), next(2), next(3), next(4), next(5)
	m.Checksum = next(8)
	m.Metadata = json.RawMessage(bytes.Clone(v[6])) // nil for NULL
	m.Version = 0
	if v[7] != nil {
		if bits := binary.BigEndian.Uint32(v[7]); bits != d.versionBits || d.version == 0 {
			f := math.Float32frombits(bits)
			d.versionBits, d.version = bits, real4(&f)
		}
		m.Version = d.version
	}
	m.Revision = int64(binary.BigEndian.Uint64(v[9]))
	m.UpdatedAt = at
	if len(v[11]) == 4 {
		m.Withheld = int64(int32(binary.BigEndian.Uint32(v[11])))
	} else {
		m.Withheld = int64(binary.BigEndian.Uint64(v[11]))
	}
	return true
}

// y2kUnix is 2000-01-01 UTC, PostgreSQL's timestamp epoch, in Unix seconds.
const y2kUnix = 946_684_800

// timestamptz converts a binary timestamptz (microseconds since
// 2000-01-01 UTC) to the time pgx scans it as, for times within 200 years
// of 2000; ok is false for others (infinities, pgx's range checks), left
// to pgx.
func timestamptz(us int64) (t time.Time, ok bool) {
	const bound = 200 * 366 * 24 * 3600 * 1_000_000
	if us <= -bound || us >= bound {
		return time.Time{}, false
	}
	return time.Unix(y2kUnix+us/1_000_000, us%1_000_000*1_000), true
}

// scanMetadata reads the current row of r into m through pgx's Scan: the
// reference decoding, for results metadataDecoder does not decode itself.
func scanMetadata(r pgx.CollectableRow, m *snapshot.MetadataRow) error {
	var (
		typ, name, org, pkg, state, body, csum *string
		version                                *float32
		at                                     *time.Time
	)
	err := r.Scan(&m.ID, &typ, &name, &org, &pkg, &state, &body, &version, &csum, &m.Revision, &at, &m.Withheld)
	m.Type, m.Name, m.OrganizationID, m.PackageID, m.State = str(typ), str(name), str(org), str(pkg), str(state)
	if body != nil {
		m.Metadata = json.RawMessage(*body)
	}
	m.Version, m.Checksum, m.UpdatedAt = real4(version), str(csum), timeOf(at)
	return err
}
