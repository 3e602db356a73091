// The store's tests of a value against a fixed set of states or kinds, written once for the
// schema (partial indexes, triggers) and the statements that must match them.
//
// Each is an OR of comparisons, never `x IN ('a', 'b', 'c')`: SQLite builds a temporary
// b-tree for a list of more than two constants after IN each time the statement runs (a
// partial index's WHERE and a trigger's WHEN run for every row written), which is most of the
// cost of a small write. A query uses a partial index only where one of its terms is the
// index's WHERE, so a statement meant to use one spells the same macro.
#pragma once

// A composition that holds its devices (requested, composing, ready, releasing).
#define SQL_IS_LIVE_STATE(c) \
  "(" c " = 'requested' OR " c " = 'composing' OR " c " = 'ready' OR " c " = 'releasing')"
// Any state event of a composition (the states of the state machine).
#define SQL_IS_STATE_KIND(k)                                                                    \
  "(" k " = 'requested' OR " k " = 'composing' OR " k " = 'ready' OR " k " = 'releasing' OR " k \
  " = 'released' OR " k " = 'failed')"
// The end of a composition.
#define SQL_IS_END_KIND(k) "(" k " = 'released' OR " k " = 'failed')"
// An event about a device rather than a composition.
#define SQL_IS_DEVICE_KIND(k) "(" k " = 'drain' OR " k " = 'resume' OR " k " = 'health')"
