// Command demo drives the `make run` demo: it seeds the embedded SQLite
// store with the public CRM's metadata, a datasource on a SQLite file and
// a connector; serves the small upstream that connector probes; and
// makes the changes the README walks through, with plain SQL as any
// application writing the shared rows would.
//
//	go run ./scripts/demo seed [-store demo/reconciler.db] [-upstream http://127.0.0.1:9478]
//	go run ./scripts/demo upstream [-listen 127.0.0.1:9478] [-token demo-good-token]
//	go run ./scripts/demo set-credential crm-token demo-good-token
//	go run ./scripts/demo touch object account
//	go run ./scripts/demo set-metadata hook AccountHealthScoreTrigger '{"name":"AccountHealthScoreTrigger","object":"account"}'
//	go run ./scripts/demo delete view hot_accounts
package main

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
)

// The demo's connector, credential and datasource.
const (
	connectorName = "crm"
	credentialRef = "crm-token"
	wrongToken    = "demo-wrong-token"
	goodToken     = "demo-good-token"
	datasource    = "crm_db"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("demo: ")
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	store := fs.String("store", "demo/reconciler.db", "SQLite store file")
	var err error
	switch os.Args[1] {
	case "seed":
		upstream := fs.String("upstream", "http://127.0.0.1:9478", "base URL of the demo upstream")
		dsPath := fs.String("datasource", "demo/crm.db", "SQLite file of the crm_db datasource")
		_ = fs.Parse(os.Args[2:])
		err = withDB(*store, func(db *sql.DB) error { return seed(db, *upstream, *dsPath) })
	case "upstream":
		listen := fs.String("listen", "127.0.0.1:9478", "address to serve on")
		token := fs.String("token", goodToken, "the only bearer token accepted")
		_ = fs.Parse(os.Args[2:])
		err = serveUpstream(*listen, *token)
	case "set-credential":
		_ = fs.Parse(os.Args[2:])
		args := need(fs, 2, "set-credential REF VALUE")
		err = withDB(*store, func(db *sql.DB) error {
			return exec(db, `INSERT INTO sys_connector_credential (ref, value) VALUES (?, ?)
				ON CONFLICT (ref) DO UPDATE SET value = excluded.value`, args[0], args[1])
		})
	case "touch":
		_ = fs.Parse(os.Args[2:])
		args := need(fs, 2, "touch TYPE NAME")
		err = withDB(*store, func(db *sql.DB) error {
			return exec(db, `UPDATE sys_metadata SET version = version + 1 WHERE type = ? AND name = ? AND state = 'active'`, args[0], args[1])
		})
	case "set-metadata":
		_ = fs.Parse(os.Args[2:])
		args := need(fs, 3, "set-metadata TYPE NAME JSON")
		if !json.Valid([]byte(args[2])) {
			log.Fatalf("not JSON: %s", args[2])
		}
		err = withDB(*store, func(db *sql.DB) error { return upsertMetadata(db, args[0], args[1], args[2]) })
	case "delete":
		_ = fs.Parse(os.Args[2:])
		args := need(fs, 2, "delete TYPE NAME")
		err = withDB(*store, func(db *sql.DB) error {
			return exec(db, `DELETE FROM sys_metadata WHERE type = ? AND name = ?`, args[0], args[1])
		})
	default:
		usage()
	}
	if err != nil {
		log.Fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: demo seed|upstream|set-credential|touch|set-metadata|delete [flags] [args]")
	os.Exit(2)
}

func need(fs *flag.FlagSet, n int, synopsis string) []string {
	if fs.NArg() != n {
		fmt.Fprintf(os.Stderr, "usage: demo %s [-store FILE]\n", synopsis)
		os.Exit(2)
	}
	return fs.Args()
}

func withDB(path string, f func(*sql.DB) error) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store %s: %w (run `reconciler migrate` first)", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
	if err != nil {
		return err
	}
	defer db.Close()
	return f(db)
}

func exec(db *sql.DB, query string, args ...any) error {
	res, err := db.Exec(query, args...)
	if err != nil {
		return err
	}
	n, _ := res.RowsAffected()
	log.Printf("%d row(s) changed", n)
	return nil
}

// upsertMetadata writes an active metadata row; an unchanged body is not
// rewritten (no new revision).
func upsertMetadata(db *sql.DB, typ, name, body string) error {
	_, err := db.Exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, state = 'active'
		WHERE sys_metadata.metadata IS NOT excluded.metadata OR sys_metadata.state <> 'active'`,
		"demo-"+typ+"-"+name, typ, name, body)
	return err
}

// seed writes the public CRM's metadata (the platform's shapes, some
// references dangling as in real life), with account stored on the crm_db
// datasource, a connector whose credential is wrong on purpose, and that
// datasource: a sys_metadata record of type datasource, as the platform
// stores it, on a SQLite file inside datasource.sqlite_dir.
func seed(db *sql.DB, upstream, dsPath string) error {
	items, err := corpus.Load()
	if err != nil {
		return err
	}
	for _, it := range items {
		body := it.Body
		if it.Type == "object" && it.Name == "account" {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				return fmt.Errorf("corpus account: %w", err)
			}
			m["datasource"] = datasource
			body, _ = json.Marshal(m)
		}
		if err := upsertMetadata(db, it.Type, it.Name, string(body)); err != nil {
			return fmt.Errorf("seed %s %s: %w", it.Type, it.Name, err)
		}
	}
	conn, _ := json.Marshal(map[string]any{
		"provider": "rest",
		"providerConfig": map[string]any{
			"baseUrl": upstream,
			"probe":   map[string]string{"method": "GET", "path": "/health"},
			"timeout": "2s",
		},
		"auth":    map[string]string{"type": "bearer", "credentialRef": credentialRef},
		"enabled": true,
	})
	if err := upsertMetadata(db, "connector", connectorName, string(conn)); err != nil {
		return fmt.Errorf("seed connector: %w", err)
	}
	// The credential starts out wrong, so the connector is held until the
	// README's fix.
	if _, err := db.Exec(`INSERT INTO sys_connector_credential (ref, value) VALUES (?, ?)
		ON CONFLICT (ref) DO UPDATE SET value = excluded.value WHERE sys_connector_credential.value IS NOT excluded.value`,
		credentialRef, wrongToken); err != nil {
		return fmt.Errorf("seed credential: %w", err)
	}
	// The datasource's file must exist: the reconciler never creates one.
	if err := createSQLite(dsPath); err != nil {
		return err
	}
	record, _ := json.Marshal(map[string]any{
		"name": datasource, "label": "CRM database", "driver": "sqlite", "schemaMode": "managed",
		"config": map[string]string{"path": filepath.Base(dsPath)}, "pool": map[string]int{"maxConns": 2},
		"active": true, "origin": "runtime",
	})
	if err := upsertMetadata(db, "datasource", datasource, string(record)); err != nil {
		return fmt.Errorf("seed datasource: %w", err)
	}
	log.Printf("seeded %d metadata items of the public CRM, connector %s (credential %s: wrong on purpose), datasource %s on %s",
		len(items), connectorName, credentialRef, datasource, dsPath)
	return nil
}

func createSQLite(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS account (id TEXT PRIMARY KEY, name TEXT)`); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// serveUpstream answers GET /health with 200 for the right bearer token
// and 401 otherwise, logging each probe.
func serveUpstream(addr, token string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		want := "Bearer " + token
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			log.Printf("upstream: %s %s -> 401 (credential refused)", r.Method, r.URL.Path)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		log.Printf("upstream: %s %s -> 200", r.Method, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("upstream listening on http://%s (accepts only the bearer token %q)", addr, token)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
