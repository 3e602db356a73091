// The store's tests of a value against a fixed set of states or kinds, written once for the
// schema (partial indexes, triggers) and the statements that must match them, in SQL that
// every backend reads alike.
//
// Each is an OR of comparisons, never `x IN ('a', 'b', 'c')`: SQLite builds a temporary
// b-tree for a list of more than two constants after IN each time the statement runs (a
// partial index's WHERE and a trigger's WHEN run for every row written), which is most of the
// cost of a small write. A query uses a partial index only where one of its terms is the
// index's WHERE, so a statement meant to use one spells the same term.
#pragma once

#include "composer/db/sql_text.h"

namespace composer::db {

// A composition that holds its devices (requested, composing, ready, releasing).
template <Text c>
inline constexpr auto is_live_state = joined<"(", c, " = 'requested' OR ", c, " = 'composing' OR ",
                                             c, " = 'ready' OR ", c, " = 'releasing')">;
// Any state event of a composition (the states of the state machine).
template <Text k>
inline constexpr auto is_state_kind =
    joined<"(", k, " = 'requested' OR ", k, " = 'composing' OR ", k, " = 'ready' OR ", k,
           " = 'releasing' OR ", k, " = 'released' OR ", k, " = 'failed')">;
// The end of a composition.
template <Text k>
inline constexpr auto is_end_kind = joined<"(", k, " = 'released' OR ", k, " = 'failed')">;
// An event about a device rather than a composition.
template <Text k>
inline constexpr auto is_device_kind =
    joined<"(", k, " = 'drain' OR ", k, " = 'resume' OR ", k, " = 'health')">;

}  // namespace composer::db
