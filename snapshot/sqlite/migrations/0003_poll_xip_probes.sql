-- reconciler schema v3 on SQLite: nothing to do (the PostgreSQL poll
-- function probes in-progress xids in the index; SQLite polls by seq).
SELECT 1;
