package datasource_test

import (
	"fmt"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
)

func ExampleParseRecord() {
	lim := datasource.Limits{MaxConns: 50, DefaultMaxConns: 10}
	rec, err := datasource.ParseRecord([]byte(`{"name":"crm","driver":"postgres","schemaMode":"managed",
		"config":{"host":"db.internal","port":5432,"database":"crm","username":"crm_app"},
		"pool":{"min":2,"max":8},"external":{"credentialsRef":"sys_secret:sec_01"},"origin":"runtime"}`), lim)
	fmt.Println(rec.Name, rec.Driver, rec.Pool.MinConns, rec.Pool.MaxConns, err)
	fmt.Println(rec.Postgres.ConnString)

	_, err = datasource.ParseRecord([]byte(`{"driver":"sqlite","config":{"path":"file:/tmp/x.db?_pragma=journal_mode(wal)"}}`), lim)
	fmt.Println(err)
	_, err = datasource.ParseRecord([]byte(`{"driver":"postgres","config":{"host":"h"},"pool":{"minConns":3000}}`), lim)
	fmt.Println(err)
	// Output:
	// crm postgres 2 8 <nil>
	// host='db.internal' port='5432' dbname='crm' user='crm_app'
	// config.path must be a plain file path, not a file: URI
	// pool.minConns (3000) exceeds the cap of 50 connections per datasource (datasource.max_conns)
}
