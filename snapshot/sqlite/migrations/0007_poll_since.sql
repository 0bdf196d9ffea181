-- reconciler schema v7 on SQLite: nothing to do (the PostgreSQL poll
-- answers an unchanged snapshot first; SQLite polls by seq).
SELECT 1;
