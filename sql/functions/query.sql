-- History search: rheo.query_page returns one page of a stream's events
-- matching a filter together with the cursor of the next page; rheo.query
-- returns the page's events as rows. See docs/query.md.
--
-- Order: (sequence, partition) ascending, or both descending. Each page
-- is, in every partition of the scope, the matching events past that
-- partition's position in the cursor, merged and cut at max_count. Within
-- a partition sequences become visible in commit order, so an event
-- committed after a page lands past its partition's position and is never
-- skipped; and positions only move over what the page examined, so
-- nothing is returned twice.
--
-- Every partition is probed through LATERAL ... ORDER BY sequence LIMIT
-- max_count, an index range scan the planner cannot turn into a scan of
-- the stream; the statement is built from fixed fragments for the filter
-- keys present, so that each plan is made for the values at hand (an
-- index on type or correlation id is only usable when the planner sees
-- the condition), and every value is passed as a parameter.
CREATE OR REPLACE FUNCTION rheo.query_page(stream text, filter jsonb DEFAULT '{}', max_count int DEFAULT 100,
                                           after text DEFAULT NULL, descending boolean DEFAULT false)
RETURNS TABLE (events rheo.events[], next_cursor text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_filter      ALIAS FOR $2;
    p_max_count   ALIAS FOR $3;
    p_after       ALIAS FOR $4;
    p_descending  ALIAS FOR $5;
    v_count       int;
    f             record;
    v_scope       int[];
    v_fingerprint text;
    v_hwm         bigint[];
    v_pos         bigint[];
    v_sql         text;
    v_events      rheo.events[];
    v_n           int;
    v_last        rheo.events;
    v_bytes       bigint;
    -- The most a page of more than one event holds, well below the 1 GB
    -- of a value, and of its text sent to the client.
    v_page_bytes  bigint := 64 * 1024 * 1024;
BEGIN
    v_count := rheo._stream(p_stream);
    f := rheo._query_filter(p_filter, v_count);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_descending IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'descending must not be NULL';
    END IF;

    IF f."partition" IS NULL THEN
        v_scope := ARRAY(SELECT generate_series(0, v_count - 1));
    ELSE
        v_scope := ARRAY[f."partition"];
    END IF;
    v_fingerprint := rheo._query_fingerprint(p_stream, p_filter, p_descending);

    -- The function is STABLE: every statement below reads the snapshot of
    -- the calling statement, so the high watermarks and the events agree.
    SELECT array_agg(pt.high_watermark ORDER BY pt."partition") INTO v_hwm
      FROM rheo.partitions pt
     WHERE pt.stream = p_stream AND pt."partition" = ANY (v_scope);

    IF p_after IS NOT NULL THEN
        v_pos := rheo._query_cursor_decode(p_after, v_fingerprint, cardinality(v_scope));
    ELSIF p_descending THEN
        -- Pin the walk to what is visible now: events appended later are
        -- above it and belong to no page of this walk.
        v_pos := ARRAY(SELECT least(h.hwm, coalesce(f.until_sequence, h.hwm)) + 1
                         FROM unnest(v_hwm) WITH ORDINALITY AS h(hwm, ord) ORDER BY h.ord);
    ELSE
        v_pos := array_fill(coalesce(f.after_sequence, 0), ARRAY[cardinality(v_scope)]);
    END IF;

    IF p_max_count = 0 THEN
        RETURN QUERY SELECT '{}'::rheo.events[], rheo._query_cursor_encode(v_fingerprint, v_pos);
        RETURN;
    END IF;

    -- $1 scope, $2 positions, $3 stream, $4 max_count, $5 type, $6 key,
    -- $7 payload, $8 metadata, $9 from, $10 to, $11 after_sequence,
    -- $12 until_sequence, $13 metadata correlation_id, $14 metadata
    -- causation_id, $15 the most bytes a page holds. Each page is at most
    -- max_count events from each partition, merged.
    --
    -- The page is one array, and PostgreSQL refuses a value over 1 GB
    -- (54000) after reading the events: the events' sizes are summed in
    -- the page's order, and the array takes only those up to the limit
    -- (the first event always), so that a page too large is refused
    -- below with the count and the size, having held no more than that.
    v_sql := 'SELECT array_agg(t.ev ORDER BY (t.ev).sequence' || CASE WHEN p_descending THEN ' DESC' ELSE '' END
          || ', (t.ev)."partition"' || CASE WHEN p_descending THEN ' DESC' ELSE '' END || ')'
          || ' FILTER (WHERE t.bytes <= $15 OR t.n = 1), count(*), max(t.bytes)'
          || ' FROM (SELECT l.ev, sum(pg_column_size(l.ev)) OVER w AS bytes, row_number() OVER w AS n'
          || ' FROM unnest($1::int[], $2::bigint[]) AS b(p, pos)'
          || ' CROSS JOIN LATERAL (SELECT ev FROM rheo.events ev'
          || ' WHERE ev.stream = $3 AND ev."partition" = b.p';
    IF p_descending THEN
        v_sql := v_sql || ' AND ev.sequence < b.pos';
        IF f.after_sequence IS NOT NULL THEN
            v_sql := v_sql || ' AND ev.sequence > $11';
        END IF;
    ELSE
        v_sql := v_sql || ' AND ev.sequence > b.pos';
        IF f.until_sequence IS NOT NULL THEN
            v_sql := v_sql || ' AND ev.sequence <= $12';
        END IF;
    END IF;
    IF f.type IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.type = $5';
    END IF;
    IF f.key IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.key = $6';
    END IF;
    IF f.payload IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.payload @> $7';
    END IF;
    IF f.metadata IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.metadata @> $8';
        -- Implied by the containment when the value is a string, and
        -- written out so that the lineage indexes can serve it.
        IF jsonb_typeof(f.metadata -> 'correlation_id') = 'string' THEN
            v_sql := v_sql || ' AND (ev.metadata ->> ''correlation_id'') = $13';
        END IF;
        IF jsonb_typeof(f.metadata -> 'causation_id') = 'string' THEN
            v_sql := v_sql || ' AND (ev.metadata ->> ''causation_id'') = $14';
        END IF;
    END IF;
    IF f.from_ts IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.ts >= $9';
    END IF;
    IF f.to_ts IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.ts <= $10';
    END IF;
    v_sql := v_sql || CASE WHEN p_descending THEN ' ORDER BY ev.sequence DESC' ELSE ' ORDER BY ev.sequence' END
          || ' LIMIT $4) AS l'
          || CASE WHEN p_descending THEN ' WINDOW w AS (ORDER BY (l.ev).sequence DESC, (l.ev)."partition" DESC ROWS UNBOUNDED PRECEDING)'
                                         ' ORDER BY (l.ev).sequence DESC, (l.ev)."partition" DESC'
                  ELSE ' WINDOW w AS (ORDER BY (l.ev).sequence, (l.ev)."partition" ROWS UNBOUNDED PRECEDING)'
                       ' ORDER BY (l.ev).sequence, (l.ev)."partition"' END
          || ' LIMIT $4) AS t';
    EXECUTE v_sql INTO v_events, v_n, v_bytes
      USING v_scope, v_pos, p_stream, p_max_count, f.type, f.key, f.payload, f.metadata,
            f.from_ts, f.to_ts, f.after_sequence, f.until_sequence,
            f.metadata ->> 'correlation_id', f.metadata ->> 'causation_id', v_page_bytes;
    IF v_n > 1 AND v_bytes > v_page_bytes THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('a page of %s events would hold %s bytes, more than the %s (64 MB) a page may: '
                            'ask for fewer with max_count', v_n, v_bytes, v_page_bytes);
    END IF;
    v_events := coalesce(v_events, '{}');

    -- Move each position over what this page examined. A short page
    -- examined everything visible in its bounds. A full page ending at
    -- (s, p) examined, ascending, every event up to (s, p) in the merge
    -- order; never past the high watermark, as later appends land there.
    -- Descending, every event from (s, p) down.
    IF v_n < p_max_count THEN
        IF p_descending THEN
            -- Below after_sequence + 1 nothing is left to match. least():
            -- after_sequence may be the largest bigint, and a position at
            -- it leaves nothing to match either.
            v_pos := array_fill(least(coalesce(f.after_sequence, 0), 9223372036854775806) + 1,
                                ARRAY[cardinality(v_scope)]);
        ELSE
            v_pos := ARRAY(SELECT greatest(x.pos, least(x.hwm, coalesce(f.until_sequence, x.hwm)))
                             FROM unnest(v_pos, v_hwm) WITH ORDINALITY AS x(pos, hwm, ord) ORDER BY x.ord);
        END IF;
    ELSE
        v_last := v_events[v_n];
        IF p_descending THEN
            v_pos := ARRAY(SELECT least(x.pos, CASE WHEN x.p >= v_last."partition" THEN v_last.sequence
                                                    ELSE v_last.sequence + 1 END)
                             FROM unnest(v_scope, v_pos) WITH ORDINALITY AS x(p, pos, ord) ORDER BY x.ord);
        ELSE
            v_pos := ARRAY(SELECT greatest(x.pos, least(x.hwm, CASE WHEN x.p <= v_last."partition" THEN v_last.sequence
                                                                    ELSE v_last.sequence - 1 END))
                             FROM unnest(v_scope, v_pos, v_hwm) WITH ORDINALITY AS x(p, pos, hwm, ord) ORDER BY x.ord);
        END IF;
    END IF;

    RETURN QUERY SELECT v_events, rheo._query_cursor_encode(v_fingerprint, v_pos);
END
$$;

-- The events of one page of a query, without its cursor (see
-- rheo.query_page).
CREATE OR REPLACE FUNCTION rheo.query(stream text, filter jsonb DEFAULT '{}', max_count int DEFAULT 100,
                                      after text DEFAULT NULL, descending boolean DEFAULT false)
RETURNS SETOF rheo.events
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.stream, e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts
      FROM rheo.query_page($1, $2, $3, $4, $5) AS q
     CROSS JOIN LATERAL unnest(q.events) WITH ORDINALITY AS e
     ORDER BY e.ordinality
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.query_page(text, jsonb, int, text, boolean)', 'rheo_reader');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo.query(text, jsonb, int, text, boolean)', 'rheo_reader');
