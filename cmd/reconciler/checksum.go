package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// maxChecksumInput bounds what `checksum FILE|-` reads.
const maxChecksumInput = 64 << 20

func checksumCmd() *command {
	return &command{
		short: "Print the platform's checksum of a body or a stored row.",
		name:  "checksum",
		usage: "[FILE|-] | --row ID [--store.url URL] [--json]",
		summary: `Print the checksum ObjectStack stores beside a metadata body (its hashSpec:
"sha256:" and the SHA-256 of the body's canonical JSON), of FILE or of the
standard input (- or no argument).

With --row ID, read the sys_metadata row ID from the store and print its
stored checksum beside its body's, and how to fix a mismatch: set the
checksum column to the body's checksum, or to NULL (the platform accepts
NULL; the reconciler checks no NULL checksum). A held "checksum mismatch"
names the row to run it on.`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			fs.String("row", "", "the sys_metadata id of a stored row to check")
			config.AddFlags(fs, config.KeyStoreURL)
			jsonFlag(fs)
		},
		run: runChecksum,
	}
}

// checksumRow is the answer of `reconciler checksum --row ID --json`.
type checksumRow struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	Revision int64  `json:"revision"`
	// Stored is the row's checksum column ("" when NULL).
	Stored string `json:"stored"`
	// Body is the checksum of the row's body ("" when it has none: Error
	// says why).
	Body string `json:"body"`
	// Match: Stored is NULL or equals Body.
	Match bool   `json:"match"`
	Error string `json:"error,omitempty"`
	// Fix is the statement that makes the stored checksum true ("" when it
	// is).
	Fix string `json:"fix,omitempty"`
}

func runChecksum(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	id, _ := fs.GetString("row")
	asJSON, _ := fs.GetBool("json")
	if id == "" {
		return checksumFile(c, asJSON)
	}
	if err := noArgs(c); err != nil {
		return usagef("--row reads the store: no FILE with it")
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	store, err := snapshot.Open(cfg.StoreURL, snapshot.OpenOptions{})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := store.Read(ctx, []snapshot.Address{{Table: snapshot.TableMetadata, Key: id}})
	if err != nil {
		return fmt.Errorf("read row %s: %w", id, err)
	}
	if len(rows.Metadata) == 0 {
		return fmt.Errorf("no sys_metadata row with id %q in %s", id, redact.URL(cfg.StoreURL))
	}
	row := rows.Metadata[0]
	out := checksumRow{ID: row.ID, Type: row.Type, Name: row.Name, Revision: row.Revision, Stored: row.Checksum}
	sum, err := metadata.Checksum(row.Metadata)
	if err != nil {
		out.Error = err.Error()
	} else {
		out.Body = sum
	}
	out.Match = row.Checksum == "" || row.Checksum == out.Body
	if !out.Match {
		out.Fix = metadata.ChecksumFix(row.ID, out.Body)
	}
	if asJSON {
		return printJSON(c.stdout, out)
	}
	stored := out.Stored
	if stored == "" {
		stored = "NULL (not checked)"
	}
	body := out.Body
	if body == "" {
		body = "none: " + out.Error
	}
	fmt.Fprintf(c.stdout, "row %s: %s/%s, revision %d\n", clean(row.ID), clean(row.Type), clean(row.Name), row.Revision)
	fmt.Fprintf(c.stdout, "stored checksum  %s\n", clean(stored))
	fmt.Fprintf(c.stdout, "body checksum    %s\n", clean(body))
	if out.Match {
		fmt.Fprintln(c.stdout, "match")
		return nil
	}
	fmt.Fprintf(c.stdout, "MISMATCH: fix the row with\n  %s\n", clean(out.Fix))
	return nil
}

// checksumFile prints the checksum of the body in the one argument (a
// file, or - for the standard input; none: the standard input).
func checksumFile(c *cli, asJSON bool) error {
	if len(c.args) > 1 {
		return usagef("want one FILE (or -), got %d arguments", len(c.args))
	}
	name := "-"
	if len(c.args) == 1 {
		name = c.args[0]
	}
	var r io.Reader = c.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, maxChecksumInput+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if len(body) > maxChecksumInput {
		return fmt.Errorf("%s: longer than %d bytes", name, maxChecksumInput)
	}
	sum, err := metadata.Checksum(body)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if asJSON {
		return printJSON(c.stdout, map[string]string{"checksum": sum})
	}
	_, err = fmt.Fprintln(c.stdout, sum)
	return err
}
