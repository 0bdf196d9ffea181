package reconcile

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// A cold start over many rows logs one summary line at info and a line
// for each entry that did not end ready (here one held object), not a
// line per ready entry; a small pass still logs each change.
func TestBulkApplyLogsASummary(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		const n = 150
		var values []string
		for i := range n {
			values = append(values, fmt.Sprintf("('o%d','object','o%d','{\"fields\":{}}')", i, i))
		}
		snapshottest.Exec(t, url, "INSERT INTO sys_metadata (id, type, name, metadata) VALUES "+strings.Join(values, ","))
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('bad','object','bad','not json')`)
		var logs syncBuffer
		b := start(t, s, url, Options{ResyncInterval: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		out := logs.String()
		if got := strings.Count(out, "msg=\"applied in bulk"); got != 1 {
			t.Fatalf("%d summary lines, want 1:\n%s", got, out)
		}
		if !strings.Contains(out, "changes=151") || !strings.Contains(out, "ready=150") || !strings.Contains(out, "held=1") {
			t.Errorf("summary does not count the changes:\n%s", out)
		}
		if got := strings.Count(out, "msg=applied "); got != 1 || !strings.Contains(out, "key=object/bad") {
			t.Errorf("%d per-entry info lines, want 1 (the held object):\n%s", got, out)
		}
		b.exec(`UPDATE sys_metadata SET metadata = '{"fields":{"x":{"type":"text"}}}' WHERE id = 'o1'`)
		b.waitFor("the small change logged", func() bool { return strings.Contains(logs.String(), "key=object/o1") })
		if strings.Count(logs.String(), "msg=\"applied in bulk") != 1 {
			t.Errorf("a one-change pass logged a summary")
		}
	})
}
