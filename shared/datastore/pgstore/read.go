package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ReadBuckets returns the buckets' records (bucket, key, value) of the
// store kept in schema, read in one REPEATABLE READ READ ONLY
// transaction without taking the schema's locks: a consistent snapshot
// of what the store had committed, safe beside the running server that
// owns it, changing nothing (aggregator export-ledger).
func ReadBuckets(ctx context.Context, dsn, schema string, buckets []string) (map[string]map[string][]byte, error) {
	if !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want lower case letters, digits and underscores, at most 63", schema)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	defer tx.Rollback(context.Background())
	bs := make([][]byte, len(buckets))
	out := make(map[string]map[string][]byte, len(buckets))
	for i, b := range buckets {
		bs[i] = []byte(b)
		out[b] = map[string][]byte{}
	}
	rows, err := tx.Query(ctx, "SELECT bucket, key, value FROM "+pgx.Identifier{schema, Table}.Sanitize()+" WHERE bucket = ANY($1)", bs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: schema %s: %w", schema, err)
	}
	defer rows.Close()
	for rows.Next() {
		var b, k, v []byte
		if err := rows.Scan(&b, &k, &v); err != nil {
			return nil, fmt.Errorf("pgstore: schema %s: %w", schema, err)
		}
		out[string(b)][string(k)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: schema %s: %w", schema, err)
	}
	return out, nil
}
