package drivertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func errorCases(t *testing.T, h Harness) {
	t.Run("ping answers", func(t *testing.T) {
		b := setup(t, h)
		require.NoError(t, b.d.Ping(b.ctx))
	})

	t.Run("creating a stream twice reports already_exists", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		require.ErrorIs(t, b.d.CreateStream(b.ctx, s, 1), rheo.ErrAlreadyExists)
		require.ErrorIs(t, b.d.CreateStream(b.ctx, s, 3), rheo.ErrAlreadyExists)
	})

	t.Run("creating a group twice reports already_exists", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		require.ErrorIs(t, b.d.CreateGroup(b.ctx, s, g, nil), rheo.ErrAlreadyExists)
	})

	t.Run("one group name can be used on two streams", func(t *testing.T) {
		b := setup(t, h)
		s1, s2 := b.stream(1), b.stream(1)
		require.NoError(t, b.d.CreateGroup(b.ctx, s1, "workers", nil))
		require.NoError(t, b.d.CreateGroup(b.ctx, s2, "workers", nil))
	})

	t.Run("a stream needs at least one partition", func(t *testing.T) {
		b := setup(t, h)
		for _, n := range []int{0, -1} {
			require.ErrorIs(t, b.d.CreateStream(b.ctx, uniqueName("s"), n), rheo.ErrInvalidPartitionCount, "partition_count %d", n)
		}
	})

	t.Run("invalid names on create report invalid_argument", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		invalid := []string{"", "-starts-with-dash", ".starts-with-dot", "has space", "tab\there",
			"nul\x00byte", "ümlaut", "star*", strings.Repeat("a", 129)}
		for _, name := range invalid {
			require.ErrorIs(t, b.d.CreateStream(b.ctx, name, 1), rheo.ErrInvalidArgument, "stream %q", name)
			require.ErrorIs(t, b.d.CreateGroup(b.ctx, s, name, nil), rheo.ErrInvalidArgument, "group %q", name)
		}
	})

	t.Run("valid names on create are accepted", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		prefix := uniqueName("n")
		for _, suffix := range []string{"a.b", "a_b", "a:b", "a/b", "a-b", "A9"} {
			require.NoError(t, b.d.CreateStream(b.ctx, prefix+suffix, 1), "stream %q", prefix+suffix)
			require.NoError(t, b.d.CreateGroup(b.ctx, s, prefix+suffix, nil), "group %q", prefix+suffix)
		}
		long := prefix + strings.Repeat("x", 128-len(prefix))
		require.NoError(t, b.d.CreateStream(b.ctx, long, 1), "a 128-character stream name")
		require.NoError(t, b.d.CreateGroup(b.ctx, s, long, nil), "a 128-character group name")
		require.NoError(t, b.d.CreateGroup(b.ctx, s, "0", nil), "a one-digit group name")
	})

	t.Run("invalid names in lookups report not found", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		_, err := b.d.Fetch(b.ctx, "has space", "g", nil)
		require.ErrorIs(t, err, rheo.ErrStreamNotFound)
		_, err = b.d.Fetch(b.ctx, s, "has space", nil)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
		_, err = b.d.Append(b.ctx, "", json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrStreamNotFound)
		_, err = b.d.Lag(b.ctx, s, "", nil)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
	})

	t.Run("operations on a missing stream report stream_not_found", func(t *testing.T) {
		b := setup(t, h)
		missing := uniqueName("missing")
		ops := map[string]func() error{
			"create_group": func() error { return b.d.CreateGroup(b.ctx, missing, "g", nil) },
			"append": func() error {
				_, err := b.d.Append(b.ctx, missing, payload(1), nil)
				return err
			},
			"append_batch": func() error {
				_, err := b.d.AppendBatch(b.ctx, missing, []rheo.BatchItem{{Payload: payload(1)}}, nil)
				return err
			},
			"empty append_batch": func() error {
				_, err := b.d.AppendBatch(b.ctx, missing, nil, nil)
				return err
			},
			"read": func() error {
				_, err := b.d.Read(b.ctx, missing, nil)
				return err
			},
			"fetch": func() error {
				_, err := b.d.Fetch(b.ctx, missing, "g", nil)
				return err
			},
			"replay": func() error {
				_, err := b.d.Replay(b.ctx, missing, "g", &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
				return err
			},
			"reset_group": func() error {
				return b.d.ResetGroup(b.ctx, missing, "g", &rheo.ResetOptions{Confirm: true})
			},
			"lag": func() error {
				_, err := b.d.Lag(b.ctx, missing, "g", nil)
				return err
			},
			"list_groups": func() error {
				_, err := b.d.ListGroups(b.ctx, missing)
				return err
			},
			"dead_letters": func() error {
				_, err := b.d.DeadLetters(b.ctx, missing, "g", nil)
				return err
			},
			"group_info": func() error {
				_, err := b.d.GroupInfo(b.ctx, missing, "g")
				return err
			},
		}
		for name, op := range ops {
			require.ErrorIs(t, op(), rheo.ErrStreamNotFound, name)
		}
	})

	t.Run("operations on a missing group report group_not_found", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 1)
		missing := uniqueName("missing")
		ops := map[string]func() error{
			"fetch": func() error {
				_, err := b.d.Fetch(b.ctx, s, missing, nil)
				return err
			},
			"replay": func() error {
				_, err := b.d.Replay(b.ctx, s, missing, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
				return err
			},
			"reset_group": func() error {
				return b.d.ResetGroup(b.ctx, s, missing, &rheo.ResetOptions{Confirm: true})
			},
			"lag": func() error {
				_, err := b.d.Lag(b.ctx, s, missing, nil)
				return err
			},
			"dead_letters": func() error {
				_, err := b.d.DeadLetters(b.ctx, s, missing, nil)
				return err
			},
			"group_info": func() error {
				_, err := b.d.GroupInfo(b.ctx, s, missing)
				return err
			},
		}
		for name, op := range ops {
			require.ErrorIs(t, op(), rheo.ErrGroupNotFound, name)
		}
	})

	t.Run("the stream is checked before the group and the group before the arguments", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		missingStream, missingGroup := uniqueName("missing"), uniqueName("missing")
		cases := []struct {
			name string
			want error
			op   func() error
		}{
			{"fetch with a bad max_count on a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Fetch(b.ctx, missingStream, missingGroup, &rheo.FetchOptions{MaxCount: -1})
				return err
			}},
			{"fetch with a bad max_count on a missing group", rheo.ErrGroupNotFound, func() error {
				_, err := b.d.Fetch(b.ctx, s, missingGroup, &rheo.FetchOptions{MaxCount: -1})
				return err
			}},
			{"fetch with a bad partition on a missing group", rheo.ErrGroupNotFound, func() error {
				_, err := b.d.Fetch(b.ctx, s, missingGroup, &rheo.FetchOptions{Partitions: []int{99}})
				return err
			}},
			{"replay without selector on a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Replay(b.ctx, missingStream, missingGroup, &rheo.ReplayOptions{})
				return err
			}},
			{"replay without selector on a missing group", rheo.ErrGroupNotFound, func() error {
				_, err := b.d.Replay(b.ctx, s, missingGroup, &rheo.ReplayOptions{})
				return err
			}},
			{"reset with a bad partition on a missing group", rheo.ErrGroupNotFound, func() error {
				return b.d.ResetGroup(b.ctx, s, missingGroup, &rheo.ResetOptions{Confirm: true, Partitions: []int{99}})
			}},
			{"create_group with an invalid name on a missing stream", rheo.ErrStreamNotFound, func() error {
				return b.d.CreateGroup(b.ctx, missingStream, "has space", nil)
			}},
			{"create_group with bad max_attempts on a missing stream", rheo.ErrStreamNotFound, func() error {
				return b.d.CreateGroup(b.ctx, missingStream, "g", &rheo.CreateGroupOptions{MaxAttempts: -1})
			}},
			{"append of a non-object to a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Append(b.ctx, missingStream, json.RawMessage(`[1]`), nil)
				return err
			}},
			{"append to a bad partition of a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Append(b.ctx, missingStream, payload(1), &rheo.AppendOptions{Partition: ptr(99)})
				return err
			}},
			{"read of a bad partition of a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Read(b.ctx, missingStream, &rheo.ReadOptions{Partition: 99})
				return err
			}},
			{"lag of a bad partition on a missing group", rheo.ErrGroupNotFound, func() error {
				_, err := b.d.Lag(b.ctx, s, missingGroup, []int{99})
				return err
			}},
			{"dead letters after an unknown id on a missing group", rheo.ErrGroupNotFound, func() error {
				_, err := b.d.DeadLetters(b.ctx, s, missingGroup, &rheo.DeadLetterOptions{After: "nope"})
				return err
			}},
		}
		for _, c := range cases {
			require.ErrorIs(t, c.op(), c.want, c.name)
		}
	})

	t.Run("bad arguments report invalid_argument", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		cases := []struct {
			name string
			op   func() error
		}{
			{"create_group with negative max_attempts", func() error {
				return b.d.CreateGroup(b.ctx, s, uniqueName("g"), &rheo.CreateGroupOptions{MaxAttempts: -1})
			}},
			{"create_group with negative start_after", func() error {
				return b.d.CreateGroup(b.ctx, s, uniqueName("g"), &rheo.CreateGroupOptions{StartAfter: ptr(int64(-1))})
			}},
			{"append of a JSON array", func() error {
				_, err := b.d.Append(b.ctx, s, json.RawMessage(`[1, 2]`), nil)
				return err
			}},
			{"append of a JSON number", func() error {
				_, err := b.d.Append(b.ctx, s, json.RawMessage(`1`), nil)
				return err
			}},
			{"append of JSON null", func() error {
				_, err := b.d.Append(b.ctx, s, json.RawMessage(`null`), nil)
				return err
			}},
			{"append of bytes that are not JSON", func() error {
				_, err := b.d.Append(b.ctx, s, json.RawMessage(`{"a":`), nil)
				return err
			}},
			{"append of a nil payload", func() error {
				_, err := b.d.Append(b.ctx, s, nil, nil)
				return err
			}},
			{"append with array metadata", func() error {
				_, err := b.d.Append(b.ctx, s, payload(1), &rheo.AppendOptions{Metadata: json.RawMessage(`[]`)})
				return err
			}},
			{"append_batch with a non-object payload", func() error {
				_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(1)}, {Payload: json.RawMessage(`"x"`)}}, nil)
				return err
			}},
			{"append_batch with string metadata", func() error {
				_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(1)}},
					&rheo.AppendBatchOptions{Metadata: json.RawMessage(`"x"`)})
				return err
			}},
			{"read with negative max_count", func() error {
				_, err := b.d.Read(b.ctx, s, &rheo.ReadOptions{MaxCount: -1})
				return err
			}},
			{"fetch with negative max_count", func() error {
				_, err := b.d.Fetch(b.ctx, s, g, &rheo.FetchOptions{MaxCount: -1})
				return err
			}},
			{"fetch with a negative lease duration", func() error {
				_, err := b.d.Fetch(b.ctx, s, g, &rheo.FetchOptions{LeaseDuration: -time.Second})
				return err
			}},
			{"renew for no time", func() error {
				_, err := b.d.Renew(b.ctx, neverIssued, 0)
				return err
			}},
			{"renew for a negative time", func() error {
				_, err := b.d.Renew(b.ctx, neverIssued, -time.Second)
				return err
			}},
			{"retry with a negative delay", func() error {
				_, err := b.d.Retry(b.ctx, neverIssued, &rheo.RetryOptions{Delay: -time.Millisecond})
				return err
			}},
			{"dead letters with negative max_count", func() error {
				_, err := b.d.DeadLetters(b.ctx, s, g, &rheo.DeadLetterOptions{MaxCount: -1})
				return err
			}},
		}
		for _, c := range cases {
			require.ErrorIs(t, c.op(), rheo.ErrInvalidArgument, c.name)
		}
		// Nothing was written by the failed appends.
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 1)
	})

	t.Run("partitions out of range report invalid_partition", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.group(s, nil)
		for _, p := range []int{2, -1} {
			cases := map[string]func() error{
				"append": func() error {
					_, err := b.d.Append(b.ctx, s, payload(1), &rheo.AppendOptions{Partition: ptr(p)})
					return err
				},
				"append_batch": func() error {
					_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(1)}},
						&rheo.AppendBatchOptions{Partition: ptr(p)})
					return err
				},
				"read": func() error {
					_, err := b.d.Read(b.ctx, s, &rheo.ReadOptions{Partition: p})
					return err
				},
				"create_group": func() error {
					return b.d.CreateGroup(b.ctx, s, uniqueName("g"), &rheo.CreateGroupOptions{Partitions: []int{0, p}})
				},
				"fetch": func() error {
					_, err := b.d.Fetch(b.ctx, s, g, &rheo.FetchOptions{Partitions: []int{p}})
					return err
				},
				"lag": func() error {
					_, err := b.d.Lag(b.ctx, s, g, []int{p})
					return err
				},
				"replay": func() error {
					_, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0)), Partitions: []int{p}})
					return err
				},
				"reset_group": func() error {
					return b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, Partitions: []int{p}})
				},
			}
			for name, op := range cases {
				require.ErrorIs(t, op(), rheo.ErrInvalidPartition, "%s of partition %d", name, p)
			}
		}
		lag := b.lag(s, g, nil)
		require.Zero(t, lag.Partitions[0].HighWatermark+lag.Partitions[1].HighWatermark, "nothing was appended")
	})

	t.Run("arguments are checked before the lease", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Minute)
		require.NoError(t, b.d.Ack(b.ctx, l.LeaseID))
		_, err := b.d.Retry(b.ctx, l.LeaseID, &rheo.RetryOptions{Delay: -time.Second})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = b.d.Renew(b.ctx, l.LeaseID, -time.Second)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})

	t.Run("a context that ended is failed, of kind canceled or timeout", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		cancelled, cancel := context.WithCancel(b.ctx)
		cancel()
		expired, cancelExpired := context.WithDeadline(b.ctx, time.Unix(0, 0))
		defer cancelExpired()
		for _, c := range []struct {
			ctx  context.Context
			kind rheo.Kind
		}{{cancelled, rheo.KindCanceled}, {expired, rheo.KindTimeout}} {
			_, err := b.d.Append(c.ctx, s, json.RawMessage(`{}`), nil)
			require.ErrorIs(t, err, rheo.ErrFailed)
			require.Equal(t, c.kind, rheo.KindOf(err), "append: %v", err)
			_, err = b.d.Lag(c.ctx, s, g, nil)
			require.ErrorIs(t, err, rheo.ErrFailed)
			require.Equal(t, c.kind, rheo.KindOf(err), "lag: %v", err)
		}
		require.Zero(t, b.lag(s, g, nil).Partitions[0].HighWatermark, "nothing was appended")
	})
}
