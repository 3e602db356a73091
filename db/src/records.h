// What every store does alike before and after its database: the checks a write passes before
// anything is written, the text form of the lists the schema keeps in one column, and the
// ledger events each change appends. Nothing here knows a database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"
#include "composer/db/failure.h"
#include "composer/model/model.h"

namespace composer::db {

// --- Lists in one column ---------------------------------------------------------------------

// Device ids and zones are stored comma-separated (events, hosts), so neither may hold one.
inline constexpr std::string_view kListSeparator = ",";

// Into `out`, reusing the strings it already holds.
void split_into(std::string_view text, std::vector<std::string>& out);
std::vector<std::string> split(std::string_view text);
// "level:name,level:name" (see migration 6).
std::string domain_list(const std::vector<FailureDomain>& domains);
// A domains column ("level:name" comma-separated); `what` names the row in the error.
std::vector<FailureDomain> read_domains(std::string_view column, const std::string& what);
// A name stored in a comma-separated list: not empty, no comma, no whitespace or control.
bool valid_list_item(std::string_view s);

std::string quoted(std::string_view s);

// --- Refusals ---------------------------------------------------------------------------------

// Inside a transaction, a refusal of what the caller named ("no device 'x'"): unlike fail(),
// no "store: " prefix, since the sentence reaches the user who typed the name.
[[noreturn]] void refuse(ErrorCode code, std::string message);

// The database's part of a failure's message, without the "store: " prefix, to quote it
// inside a more specific sentence.
std::string failure_reason(const Failure& f);

// What each write refuses before anything is written: kInvalidArgument saying which value
// and what is allowed.
Status storable(const std::vector<Host>& hosts);
Status storable(const std::vector<Device>& devices);
Status storable(const PolicyVersion& version);
Status creatable(const Composition& c, const std::vector<std::string>& device_ids);
// kConflict for a move the state machine does not allow.
Status transitionable(int64_t id, CompositionState from, CompositionState to);
// A ledger range [since_ms, until_ms] must not end before it starts.
Status check_range(int64_t since_ms, int64_t until_ms);

// --- Events -----------------------------------------------------------------------------------

std::vector<std::string> device_ids(const Composition& c);

// The detail of a composition's first event ("requested"), which the ledger keeps for good:
// the memory policy its tasks run under ("mem_policy=interleave"), empty without one.
std::string requested_detail(const Composition& c);

// An event about composition `c`.
Event composition_event(const Composition& c, std::string_view kind, std::string_view from,
                        std::string_view to, std::string_view detail, int64_t now_ms);

// An event about device `d` (drain, resume, health, holder); it names `owner`, the composition
// holding the device if any, so accounting sees whose job was affected.
Event device_event(const std::optional<Composition>& owner, const Device& d, std::string_view kind,
                   std::string_view from, std::string_view to, std::string_view user,
                   std::string_view detail, int64_t now_ms);

// The detail of a holder change the caller left empty.
std::string holder_detail(std::string_view detail, std::string_view holder);

// --- Compositions after a write ----------------------------------------------------------------

// Why (job, node) or a device cannot join a new composition, for the database's refusal.
std::string live_job_conflict(const Composition& c, const std::optional<Composition>& live);
std::string live_device_conflict(const Device& d);

// The composition `c` read before a transition to `to`, as the transition left it: a
// composition that is no longer live owns no device.
void apply_transition(Composition& c, CompositionState to, std::string_view detail, int64_t now_ms,
                      bool attempt);

// kConflict unless `c`, read in the writing transaction, may be moved from `from` / held.
void check_state(const Composition& c, CompositionState from);
void check_holdable(const Composition& c);

}  // namespace composer::db
