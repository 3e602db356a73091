#include "composer/common/strings.h"
#include "redfish_driver.h"

namespace composer::drivers {

Status RedfishFabric::Impl::resolve(const std::string& host, const std::vector<std::string>& ids,
                                    Resolved* out) {
  for (int pass = 0; pass < 2; ++pass) {
    std::unique_lock<std::mutex> lock(index_mu);
    bool missing = !system_uris.contains(host) && !host_blocks.contains(host) &&
                   !cxl_initiators.contains(host);
    for (const std::string& id : ids) {
      missing = missing || (!block_uris.contains(id) && !cxl_chunks.contains(id));
    }
    if (missing && pass == 0) {
      lock.unlock();
      if (auto inv = inventory(); !inv) return inv.error();
      continue;
    }
    auto h = system_uris.find(host);
    auto hb = host_blocks.find(host);
    auto hi = cxl_initiators.find(host);
    if (h == system_uris.end() && hb == host_blocks.end() && hi == cxl_initiators.end()) {
      return Error{ErrorCode::kNotFound,
                   "redfish: unknown host '" + host +
                       "' (no composable system, ComputerSystem resource block or CXL "
                       "initiator endpoint has that Id)"};
    }
    *out = Resolved{};
    if (hb != host_blocks.end()) {
      out->host_block = hb->second.block_uri;
      out->host_uri = hb->second.system_uri;
      out->node = hb->second.node;
    } else if (h != system_uris.end()) {
      out->host_uri = h->second;
    }
    if (hi != cxl_initiators.end()) out->initiators = hi->second;
    for (const std::string& id : ids) {
      if (auto b = block_uris.find(id); b != block_uris.end()) {
        if (out->host_uri.empty() && out->host_block.empty()) {
          return Error{ErrorCode::kInvalidArgument,
                       "redfish: host '" + host +
                           "' is not a composed system, so it can take "
                           "only CXL memory, not the resource block '" +
                           id + "'"};
        }
        out->blocks.push_back(b->second);
      } else if (auto c = cxl_chunks.find(id); c != cxl_chunks.end()) {
        if (out->initiators.empty()) {
          return Error{ErrorCode::kInvalidArgument, "redfish: host '" + host +
                                                        "' has no CXL initiator endpoint, so it "
                                                        "cannot take the CXL memory '" +
                                                        id + "'"};
        }
        out->chunks.emplace_back(id, c->second);
      } else {
        return Error{ErrorCode::kNotFound,
                     "redfish: unknown device '" + id +
                         "' (no GPU, memory or storage resource block and no CXL memory chunk "
                         "has that Id)"};
      }
    }
    return Status::Ok();
  }
  return Status::Ok();
}

Expected<TaskPoll> RedfishFabric::Impl::poll_task(const std::string& monitor) {
  auto r = request("GET", monitor);
  if (!r) {
    if (r.error().code == ErrorCode::kNotFound) {
      return TaskPoll{TaskState::kFailed,
                      "task monitor " + monitor + " no longer exists; read the inventory"};
    }
    if (r.error().code == ErrorCode::kUnavailable || r.error().code == ErrorCode::kTimeout) {
      return r.error();  // the task may still be fine: ask again later
    }
    return TaskPoll{TaskState::kFailed, r.error().message};
  }
  if (r->status == 202) return TaskPoll{TaskState::kRunning, ""};
  const std::string state = r->body["TaskState"].asString();
  if (state.empty() || state == "Completed") {
    if (r->body["TaskStatus"].asString() == "Critical") {
      return TaskPoll{TaskState::kFailed, "task " + monitor + " completed with status Critical"};
    }
    return TaskPoll{TaskState::kDone, ""};
  }
  if (state == "Exception" || state == "Killed" || state == "Cancelled" || state == "Interrupted") {
    std::string m = error_message(api::to_text(r->body));
    return TaskPoll{TaskState::kFailed,
                    "redfish: task " + monitor + " ended " + state + (m.empty() ? "" : ": " + m)};
  }
  return TaskPoll{TaskState::kRunning, ""};
}

Expected<Operation> RedfishFabric::Impl::settle(std::vector<Step> steps, long wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    bool running = false;
    for (Step& st : steps) {
      if (st.state != TaskState::kRunning) continue;
      auto p = poll_task(st.monitor);
      if (!p) return p.error();
      st.state = p->state;
      st.message = p->message;
      running = running || st.state == TaskState::kRunning;
    }
    if (!running) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Operation{encode(steps), OperationState::kRunning, ""};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1L, o.poll_interval_ms)));
  }
  std::string failure;
  for (const Step& st : steps) {
    if (st.state == TaskState::kFailed && failure.empty()) failure = st.message;
  }
  if (failure.empty()) return Operation{encode(steps), OperationState::kDone, ""};
  for (const Step& st : steps) {
    if (st.state == TaskState::kDone && !st.undo_target.empty()) undo(st.undo_target, st.block);
  }
  return Operation{encode(steps), OperationState::kFailed, failure};
}

std::optional<Expected<Operation>> RedfishFabric::Impl::take_step(
    const std::string& host, const std::string& what, Expected<Reply> reply,
    const std::string& undo_target, const std::string& resource, std::vector<Step>* steps) {
  if (reply && reply->status == 202 && reply->location.empty()) {
    reply = fabric_error(what + " answered 202 without a Location");
  }
  if (!reply) {
    // Undo what went in before; the error is the answer.
    steps->push_back(Step{"", "", resource, TaskState::kFailed, reply.error().message});
    auto undone = settle(std::move(*steps), o.task_wait_ms);
    if (!undone || undone->state == OperationState::kRunning) {
      log::error("redfish: a change failed part way and its earlier steps are still running",
                 {{"host", host}, {"operation", undone ? undone->id : ""}});
    }
    return Expected<Operation>(reply.error());
  }
  const bool task = reply->status == 202;
  steps->push_back(Step{task ? reply->location : "", undo_target, resource,
                        task ? TaskState::kRunning : TaskState::kDone, ""});
  if (!task) return std::nullopt;
  // Wait for this step before the next, so that a failure stops the change early.
  auto w = settle(*steps, o.task_wait_ms);
  if (!w) return Expected<Operation>(w.error());
  if (w->state == OperationState::kFailed) return w;
  if (w->state == OperationState::kDone) {
    for (Step& st : *steps) st.state = TaskState::kDone;
  }
  return std::nullopt;
}

std::string RedfishFabric::Impl::encode(const std::vector<Step>& steps) {
  bool running = false;
  for (const Step& st : steps) running = running || st.state == TaskState::kRunning;
  if (!running) return "";
  std::string id(kTaskPrefix);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i > 0) id += kTaskSeparator;
    const Step& st = steps[i];
    // A step that ended well carries no monitor; one that failed carries "!" and its
    // message, so the failure survives until the whole change has ended.
    std::string head = st.monitor;
    if (st.state == TaskState::kDone) head.clear();
    if (st.state == TaskState::kFailed) {
      head = "!" + st.message;
      std::replace(head.begin(), head.end(), kTaskSeparator, '/');
      std::replace(head.begin(), head.end(), kStepSeparator, ')');
    }
    id += head + kStepSeparator + st.undo_target + kStepSeparator + st.block;
  }
  return id;
}

std::optional<std::vector<Step>> RedfishFabric::Impl::decode(const std::string& id) {
  if (!id.starts_with(kTaskPrefix)) return std::nullopt;
  std::vector<Step> steps;
  std::stringstream in(id.substr(kTaskPrefix.size()));
  for (std::string part; std::getline(in, part, kTaskSeparator);) {
    const size_t a = part.find(kStepSeparator);
    const size_t b = a == std::string::npos ? a : part.find(kStepSeparator, a + 1);
    if (b == std::string::npos) return std::nullopt;
    Step st;
    st.monitor = part.substr(0, a);
    st.undo_target = part.substr(a + 1, b - a - 1);
    st.block = part.substr(b + 1);
    st.state = st.monitor.empty() ? TaskState::kDone : TaskState::kRunning;
    if (st.monitor.starts_with("!")) {
      st.state = TaskState::kFailed;
      st.message = st.monitor.substr(1);
      st.monitor.clear();
    }
    steps.push_back(std::move(st));
  }
  if (steps.empty()) return std::nullopt;
  return steps;
}

Expected<Operation> RedfishFabric::Impl::change(const std::string& host,
                                                const std::string& host_uri,
                                                const std::vector<std::string>& uris, bool adding) {
  auto sys = request("GET", host_uri);
  if (!sys) return sys.error();
  const Json::Value& system = sys->body;
  std::vector<std::string> current = links(system["Links"]["ResourceBlocks"]);
  std::vector<std::string> todo;
  for (const std::string& uri : uris) {
    auto block = get(uri);
    if (!block) return block.error();
    const std::vector<std::string> owners = links((*block)["Links"]["ComputerSystems"]);
    const bool in_host =
        std::find(current.begin(), current.end(), uri) != current.end() ||
        std::find(owners.begin(), owners.end(), trim_slash(host_uri)) != owners.end();
    // Detaching what is not in this host is done already, wherever else it sits: a block in
    // another system stays there.
    if (adding && !in_host && !owners.empty() &&
        !(*block)["CompositionStatus"]["SharingEnabled"].asBool()) {
      return Error{ErrorCode::kConflict,
                   "redfish: device " + last_segment(uri) + " is composed into " +
                       describe_system(owners.front()) + ", cannot attach it to " + host};
    }
    if (in_host != adding) todo.push_back(uri);
  }
  if (todo.empty()) return Operation{"", OperationState::kDone, ""};

  const std::string target =
      action_target(system, adding ? "AddResourceBlock" : "RemoveResourceBlock");
  if (target.empty()) {
    auto op = patch(host, host_uri, *sys, current, todo, adding);
    if (!op || op->state != OperationState::kDone || !op->id.empty()) return op;
    return read_back(host, host_uri, todo, adding, "PATCH " + host_uri, {});
  }

  const std::string undo_target =
      action_target(system, adding ? "RemoveResourceBlock" : "AddResourceBlock");
  std::vector<Step> steps;
  bool tasks = false;
  for (const std::string& u : todo) {
    Json::Value body;
    body["ResourceBlock"]["@odata.id"] = u;
    auto r = request("POST", target, &body);
    tasks = tasks || (r && r->status == 202);
    if (auto stop = take_step(host, "POST " + target, std::move(r), undo_target, u, &steps)) {
      return *stop;
    }
  }
  auto op = settle(std::move(steps), o.task_wait_ms);
  if (!op || op->state != OperationState::kDone || tasks) return op;
  return read_back(host, host_uri, todo, adding, "POST " + target, undo_target);
}

Expected<Operation> RedfishFabric::Impl::read_back(const std::string& host,
                                                   const std::string& host_uri,
                                                   const std::vector<std::string>& todo,
                                                   bool adding, const std::string& what,
                                                   const std::string& undo_target) {
  auto sys = request("GET", host_uri);
  if (!sys) return sys.error();
  const std::vector<std::string> now = links(sys->body["Links"]["ResourceBlocks"]);
  std::vector<std::string> unchanged, changed;
  for (const std::string& u : todo) {
    const bool in = std::find(now.begin(), now.end(), u) != now.end();
    (in == adding ? changed : unchanged).push_back(u);
  }
  if (unchanged.empty()) return Operation{"", OperationState::kDone, ""};
  // Success answered, nothing done: undo what did change, so the call is all or nothing.
  if (!undo_target.empty()) {
    for (const std::string& u : changed) undo(undo_target, u);
  }
  std::vector<std::string> ids;
  for (const std::string& u : unchanged) ids.push_back(last_segment(u));
  return fabric_error(what + " answered success, but " + describe_system(host_uri) +
                      (adding ? " does not list " : " still lists ") + join(ids, ", ") +
                      " in Links.ResourceBlocks when read back; the service did not " +
                      (adding ? "attach them to " : "detach them from ") + host);
}

std::string RedfishFabric::Impl::describe_system(const std::string& uri) {
  const std::string id = last_segment(uri);
  std::lock_guard<std::mutex> lock(index_mu);
  auto it = system_hosts.find(trim_slash(path_of(uri)));
  if (it == system_hosts.end() || it->second == id) return "system " + id;
  return "system " + id + " of host " + it->second;
}

Expected<Operation> RedfishFabric::Impl::host_block_change(const std::string& host,
                                                           const Resolved& r, bool adding) {
  auto system = composed_system(r.host_block, r.host_uri);
  if (!system) return system.error();
  if (!system->empty()) return change(host, *system, r.blocks, adding);
  // No system yet, so nothing of this host to detach; a block in another system still
  // refuses an attach, as for every host.
  if (!adding) return Operation{"", OperationState::kDone, ""};
  for (const std::string& uri : r.blocks) {
    auto block = get(uri);
    if (!block) return block.error();
    const std::vector<std::string> owners = links((*block)["Links"]["ComputerSystems"]);
    if (!owners.empty() && !(*block)["CompositionStatus"]["SharingEnabled"].asBool()) {
      return Error{ErrorCode::kConflict,
                   "redfish: device " + last_segment(uri) + " is composed into " +
                       describe_system(owners.front()) + ", cannot attach it to " + host};
    }
  }
  if (r.blocks.empty()) return Operation{"", OperationState::kDone, ""};
  return compose(host, r);
}

Expected<std::string> RedfishFabric::Impl::composed_system(const std::string& block_uri,
                                                           const std::string& known) {
  auto block = get(block_uri);
  if (!block) return block.error();
  const std::vector<std::string> owners = links((*block)["Links"]["ComputerSystems"]);
  if (!owners.empty()) return trim_slash(path_of(owners.front()));
  if (known.empty()) return std::string();
  auto sys = request("GET", known);
  if (!sys) {
    if (sys.error().code == ErrorCode::kNotFound) return std::string();
    return sys.error();
  }
  const std::vector<std::string> held = links(sys->body["Links"]["ResourceBlocks"]);
  return std::find(held.begin(), held.end(), block_uri) != held.end() ? known : std::string();
}

Expected<Operation> RedfishFabric::Impl::compose(const std::string& host, const Resolved& r) {
  if (compose_target.empty()) {
    return fabric_error("host " + host +
                        " is a ComputerSystem resource block with no system composed from it, "
                        "and the service's ComputerSystemComposition capabilities name no "
                        "TargetCollection to compose one in");
  }
  const std::string name = r.node.empty() ? host : r.node;
  Json::Value body;
  body["Name"] = name;
  body["Description"] = "Composed for Slurm node " + name;
  body["Links"]["ResourceBlocks"] = Json::Value(Json::arrayValue);
  Json::Value compute;
  compute["@odata.id"] = r.host_block;
  body["Links"]["ResourceBlocks"].append(compute);
  for (const std::string& u : r.blocks) {
    Json::Value link;
    link["@odata.id"] = u;
    body["Links"]["ResourceBlocks"].append(link);
  }
  auto reply = request("POST", compose_target, &body);
  if (!reply) {
    if (reply.error().code == ErrorCode::kConflict) {
      // Perhaps composed meanwhile (an earlier try whose answer was lost, or a service that
      // does not link the system from the block): read again, and add to that system.
      if (auto inv = inventory(); inv) {
        std::string system;
        {
          std::lock_guard<std::mutex> lock(index_mu);
          if (auto it = host_blocks.find(host); it != host_blocks.end()) {
            system = it->second.system_uri;
          }
        }
        if (!system.empty()) return change(host, system, r.blocks, true);
      }
    }
    return reply.error();
  }
  if (reply->status == 202) {
    if (reply->location.empty()) {
      return fabric_error("POST " + compose_target + " answered 202 without a Location");
    }
    // The new system is found from the block once the task has ended.
    return settle({Step{reply->location, "", r.host_block, TaskState::kRunning, ""}},
                  o.task_wait_ms);
  }
  std::string system = reply->location;
  if (system.empty()) system = odata_id(reply->body);
  system = trim_slash(path_of(system));
  if (!system.empty()) {
    std::lock_guard<std::mutex> lock(index_mu);
    if (auto it = host_blocks.find(host); it != host_blocks.end()) it->second.system_uri = system;
    system_hosts[system] = host;
  }
  log::info("redfish: system composed", {{"host", host}, {"system", system}});
  return Operation{"", OperationState::kDone, ""};
}

Expected<Operation> RedfishFabric::Impl::patch(const std::string& host, const std::string& host_uri,
                                               const Reply& sys,
                                               const std::vector<std::string>& current,
                                               const std::vector<std::string>& todo, bool adding) {
  if (!sys.body["Links"].isMember("ResourceBlocks")) {
    return fabric_error("system " + host +
                        " advertises neither resource block actions nor Links.ResourceBlocks");
  }
  std::vector<std::string> next;
  for (const std::string& u : current) {
    if (adding || std::find(todo.begin(), todo.end(), u) == todo.end()) next.push_back(u);
  }
  if (adding) next.insert(next.end(), todo.begin(), todo.end());
  Json::Value body;
  body["Links"]["ResourceBlocks"] = Json::Value(Json::arrayValue);
  for (const std::string& u : next) {
    Json::Value link;
    link["@odata.id"] = u;
    body["Links"]["ResourceBlocks"].append(link);
  }
  std::vector<std::string> extra;
  if (!sys.etag.empty()) extra.push_back("If-Match: " + sys.etag);
  auto r = request("PATCH", host_uri, &body, extra);
  if (!r) return r.error();
  if (r->status != 202) return Operation{"", OperationState::kDone, ""};
  if (r->location.empty()) {
    return fabric_error("PATCH " + host_uri + " answered 202 without a Location");
  }
  return settle({Step{r->location, "", last_segment(host_uri), TaskState::kRunning, ""}},
                o.task_wait_ms);
}

void RedfishFabric::Impl::undo(const std::string& target, const std::string& block) {
  auto r = [&]() -> Expected<Reply> {
    if (target.starts_with(kCxlDisconnect)) {
      const std::string initiator = target.substr(kCxlDisconnect.size());
      auto conns = cxl_connections();
      if (!conns) return conns.error();
      for (const CxlConnection& c : *conns) {
        // Only the connection of exactly this initiator and this chunk: the one undone.
        if (c.chunks == std::vector<std::string>{block} &&
            c.initiators == std::vector<std::string>{initiator}) {
          return request("DELETE", c.uri);
        }
      }
      return Reply{204, Json::Value(), "", ""};  // nothing left to remove
    }
    if (target.starts_with(kCxlConnect)) {
      const std::string rest = target.substr(kCxlConnect.size());
      const size_t comma = rest.find(',');
      Json::Value body = memory_connection(
          rest.substr(0, comma), comma == std::string::npos ? "" : rest.substr(comma + 1), block);
      return request("POST", cxl_connections_uri, &body);
    }
    Json::Value body;
    body["ResourceBlock"]["@odata.id"] = block;
    return request("POST", target, &body);
  }();
  std::string failure = r ? "" : r.error().message;
  if (r && r->status == 202 && !r->location.empty()) {
    // The failure is only reported once the undo has ended (or this bound has passed), so
    // that the caller sees the system as it was.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::max(o.task_wait_ms, o.request_timeout_ms));
    for (;;) {
      auto p = poll_task(r->location);
      if (!p) {
        failure = p.error().message;
      } else if (p->state == TaskState::kFailed) {
        failure = p->message;
      } else if (p->state == TaskState::kRunning && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1L, o.poll_interval_ms)));
        continue;
      }
      break;
    }
  }
  if (!failure.empty()) {
    log::error("redfish: cannot undo a step of a failed change; the reconciler will find it",
               {{"block", block}, {"error", failure}});
  }
}

Expected<Operation> RedfishFabric::Impl::apply(const std::string& host,
                                               const std::vector<std::string>& ids, bool adding) {
  Resolved r;
  if (Status s = resolve(host, ids, &r); !s) return s.error();
  Expected<Operation> cxl = Operation{"", OperationState::kDone, ""};
  if (!r.chunks.empty()) {
    cxl = cxl_change(host, r, adding);
    if (!cxl || cxl->state == OperationState::kFailed) return cxl;
  }
  if (r.blocks.empty()) return cxl;
  auto op = r.host_block.empty() ? change(host, r.host_uri, r.blocks, adding)
                                 : host_block_change(host, r, adding);
  if ((!op || op->state == OperationState::kFailed) && !r.chunks.empty()) {
    if (cxl->state == OperationState::kDone) {
      // Reverse the CXL part; its own steps are not kept once done, so ask again.
      Resolved back = r;
      back.blocks.clear();
      (void)cxl_change(host, back, !adding);
    }
    return op;
  }
  if (!op) return op;
  if (cxl->state == OperationState::kRunning && op->state == OperationState::kRunning) {
    op->id = cxl->id + kTaskSeparator + op->id.substr(kTaskPrefix.size());
  } else if (cxl->state == OperationState::kRunning) {
    return cxl;
  }
  return op;
}

}  // namespace composer::drivers
