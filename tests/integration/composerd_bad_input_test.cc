// A generated campaign of bad requests against the real composerd: for every route of
// docs/API.md's Endpoints table, bad path segments (job ids out of range or not numbers, names
// with control characters or bytes that are not UTF-8, unknown ids and domains), bad query
// parameters (each parameter the table names, with values of the wrong type, out of range, not
// UTF-8, and parameters no route takes), and for every route that takes a body, bodies that are
// not JSON, JSON that is too deep, and every field of a valid body replaced with values of the
// wrong type, out of range, with control characters or bytes that are not UTF-8, removed, or
// joined by fields that do not exist. All are sent by root, so nothing is refused for who sends
// it. Each must be refused with a 4xx and an error body whose code is the one docs/API.md fixes
// for that status, as valid UTF-8; afterwards composerd is still up and every composition,
// device, host, the pool, the policy history and the ledger (but its `refused` audit events)
// are exactly what they were. The test prints how many requests it sent
// (docs/RELIABILITY.md).
#include <json/json.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "composer/api/codec.h"
#include "composer/common/strings.h"
#include "composerd_process.h"
#include "documented_routes.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

using Row = DocumentedRoute;

struct Probe {
  std::string method, path, body;
};

// Values that are no job id: out of range, signs, fractions, other bases, not digits at all,
// percent-encoded bytes that are not UTF-8 or are control characters.
const std::vector<std::string> kBadJobs = {"0",
                                           "4294967295",
                                           "4294967296",
                                           "-1",
                                           "+1",
                                           "1.5",
                                           "1e3",
                                           "0x10",
                                           "abc",
                                           "%201",
                                           "1%20",
                                           "%ff",
                                           "%00",
                                           "1%00",
                                           "%d9%a1" /* ARABIC-INDIC ONE */,
                                           "99999999999999999999999999",
                                           std::string(300, '9')};

// Values no number parameter takes.
const std::vector<std::string> kBadNumbers = {"",      "-1",   "+1",   "1.5",
                                              "1e3",   "0x10", "abc",  "%201",
                                              "%ff",   "%00",  "1%00", "99999999999999999999999999",
                                              "%d9%a1"};

// Values no text parameter or name takes: not UTF-8, overlong forms, surrogates, control
// characters.
const std::vector<std::string> kBadText = {"%ff",   "%c0%af",    "%ed%a0%80", "%00",  "a%0db",
                                           "a%0ab", "%1b%5b31m", "%7f",       "a%09b"};

const std::vector<std::string> kBadNames = {
    "%ff",   "%00",    "n%0a1", "n%0d1",     "n%201",
    "n%2f1", "%c0%af", "%7f",   "%e2%80%ae", std::string(300, 'n')};

// Raw JSON texts that are no whole number 0..2^32-1 (or any narrower range).
const std::vector<std::string> kBadIntegers = {"null",
                                               "true",
                                               "\"1\"",
                                               "-1",
                                               "1.5",
                                               "2.0",
                                               "1e3",
                                               "01",
                                               "00",
                                               "-00",
                                               "+1",
                                               "1.",
                                               "[]",
                                               "{}",
                                               "[1]",
                                               "NaN",
                                               "Infinity",
                                               "0x10",
                                               "99999999999999999999999999",
                                               "18446744073709551616"};

// Raw JSON texts that are no boolean.
const std::vector<std::string> kBadBooleans = {"null", "1",   "0",    "\"true\"", "[]",
                                               "{}",   "tru", "True", "[true]"};

// Raw JSON texts that are no text for a field that takes one.
const std::vector<std::string> kBadStrings = {"null",
                                              "1",
                                              "true",
                                              "[]",
                                              "{}",
                                              "[\"a\"]",
                                              "\"a\\u0000b\"",
                                              "\"a\\rb\"",
                                              "\"a\\u001bb\"",
                                              "\"a\\nb\"",
                                              "\"a\x01z\"",
                                              "\"\xff\"",
                                              "\"\xc0\xaf\"",
                                              "\"\xed\xa0\x80\"",
                                              "\"\\ud800\"",
                                              "\"a\tb\"",
                                              "\"\xf8\x88\x80\x80\x80\""};

// Texts that are no JSON document at all, or one the codec refuses whatever it holds.
std::vector<std::string> malformed_documents(const std::string& valid) {
  std::vector<std::string> out = {"{",
                                  "}",
                                  "[",
                                  "{\"a\":}",
                                  valid.substr(0, valid.size() / 2),
                                  valid + "x",
                                  valid + valid,
                                  valid.substr(0, valid.size() - 1) + ",}",
                                  "\xef\xbb\xbf" + valid,
                                  "/* comment */" + valid,
                                  valid + std::string("\0", 1),
                                  "{'uid':1}",
                                  "\xff\xfe{",
                                  "[]",
                                  "null",
                                  "1",
                                  "\"text\"",
                                  "true"};
  // Deeper than the 64 levels the codec reads, in an unknown field and as a whole.
  for (size_t depth : {65u, 1000u, 100000u}) {
    out.push_back(std::string(depth, '[') + std::string(depth, ']'));
    out.push_back(valid.substr(0, valid.size() - 1) + ",\"deep\":" + std::string(depth, '[') +
                  std::string(depth, ']') + "}");
  }
  return out;
}

// A JSON object's text, from its members' raw texts in order.
std::string object_of(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out = "{";
  for (const auto& [key, raw] : members) {
    out += (out.size() > 1 ? "," : "") + std::string("\"") + key + "\":" + raw;
  }
  return out + "}";
}

// Field name -> raw value text, with dotted names for the one nested object `request`.
using Fields = std::vector<std::pair<std::string, std::string>>;

std::string body_of(const Fields& fields) {
  Fields top;
  Fields request;
  bool has_request = false;
  for (const auto& [key, raw] : fields) {
    if (key.starts_with("request.")) {
      request.emplace_back(key.substr(8), raw);
      has_request = true;
    } else {
      top.emplace_back(key, raw);  // "request" itself: the request replaced whole
    }
  }
  if (has_request) top.emplace_back("request", object_of(request));
  return object_of(top);
}

// Every variant of a body that must be refused: each field replaced by the values its type
// refuses (and any extra ones given), each required field left out, an unknown field at each
// level, and the malformed documents.
// `integers` and `booleans` name the fields of those types; every other field is text.
std::vector<std::string> bad_bodies(const Fields& valid, const std::set<std::string>& integers,
                                    const std::set<std::string>& required,
                                    const std::map<std::string, std::vector<std::string>>& extra,
                                    const std::set<std::string>& booleans = {}) {
  std::vector<std::string> out;
  for (size_t i = 0; i < valid.size(); ++i) {
    const std::string& key = valid[i].first;
    std::vector<std::string> values = integers.contains(key)   ? kBadIntegers
                                      : booleans.contains(key) ? kBadBooleans
                                                               : kBadStrings;
    if (auto it = extra.find(key); it != extra.end()) {
      values.insert(values.end(), it->second.begin(), it->second.end());
    }
    for (const std::string& v : values) {
      Fields f = valid;
      f[i].second = v;
      out.push_back(body_of(f));
    }
    if (required.contains(key)) {
      Fields f = valid;
      f.erase(f.begin() + static_cast<long>(i));
      out.push_back(body_of(f));
    }
  }
  for (const char* unknown : {"bogus", "request.bogus", "Uid", "request.GPUS"}) {
    Fields f = valid;
    f.emplace_back(unknown, "1");
    out.push_back(body_of(f));
  }
  for (const std::string& m : malformed_documents(body_of(valid))) out.push_back(m);
  return out;
}

const Fields kComposeBody = {{"uid", "1000"},
                             {"user", "\"alice\""},
                             {"account", "\"physics\""},
                             {"workload", "\"training\""},
                             {"request.gpus", "1"},
                             {"request.gpu_model", "\"\""},
                             {"request.mem_bytes", "0"},
                             {"request.nvme", "0"}};
const std::set<std::string> kComposeIntegers = {"uid", "request.gpus", "request.mem_bytes",
                                                "request.nvme"};
const std::map<std::string, std::vector<std::string>> kComposeExtra = {
    {"user", {"\"\""}},
    {"uid", {"4294967296"}},
    {"request.gpus", {"1025"}},
    {"request.nvme", {"1025"}},
    {"request.mem_bytes", {"1125899906842625"}}};

std::vector<std::string> compose_bodies() {
  std::vector<std::string> out =
      bad_bodies(kComposeBody, kComposeIntegers, {"uid", "user"}, kComposeExtra);
  for (const char* request : {"null", "[]", "1", "\"x\"", "true"}) {
    Fields f = {kComposeBody[0], kComposeBody[1], {"request", request}};
    out.push_back(body_of(f));
  }
  // `nodes` belongs to the job's PUT only.
  Fields f = kComposeBody;
  f.emplace_back("nodes", "[\"n1\"]");
  out.push_back(body_of(f));
  return out;
}

std::vector<std::string> job_compose_bodies() {
  Fields valid = kComposeBody;
  valid.emplace_back("nodes", "[\"n1\",\"n2\"]");
  std::map<std::string, std::vector<std::string>> extra = kComposeExtra;
  std::string many = "[";
  for (int i = 0; i <= 65536; ++i) many += (i ? ",\"x" : "\"x") + std::to_string(i) + "\"";
  extra["nodes"] = {"[]",
                    "[1]",
                    "[\"n1\",\"n1\"]",
                    "[\"\"]",
                    "[\"n 1\"]",
                    "[\"n1\\u0000\"]",
                    "[\"\xff\"]",
                    "[null]",
                    "[\"n1\",[\"n2\"]]",
                    "[\"" + std::string(300, 'n') + "\"]",
                    many + "]"};
  std::vector<std::string> out =
      bad_bodies(valid, kComposeIntegers, {"uid", "user", "nodes"}, extra);
  return out;
}

std::vector<std::string> drain_bodies() {
  return bad_bodies({{"reason", "\"maintenance\""}}, {}, {"reason"}, {{"reason", {"\"\""}}});
}

// The actions that take {} or nothing.
std::vector<std::string> empty_bodies() {
  std::vector<std::string> out = {"{\"reason\":\"x\"}",
                                  "{\"bogus\":1}",
                                  "[]",
                                  "null",
                                  "1",
                                  "\"{}\"",
                                  "{}{}",
                                  "{",
                                  "{} x",
                                  "\xff"};
  for (size_t depth : {65u, 100000u}) {
    out.push_back(std::string(depth, '[') + std::string(depth, ']'));
  }
  return out;
}

std::vector<std::string> policy_bodies() {
  std::vector<std::string> out =
      bad_bodies({{"file", "\"day.policy\""},
                  {"text", "\"TimeZone=UTC\\nClass=training\\n\""},
                  {"dry_run", "false"}},
                 {}, {"text"},
                 {{"text",
                   {"\"Window=\"", "\"garbage\"", "\"TimeZone=Mars/Olympus\"",
                    "\"Class=training\\nLimit=training Window=nowhere Gpus=1\"",
                    "\"Class=training\\nLimit=training Gpus=-1\""}}},
                 {"dry_run"});
  return out;
}

// The placeholders of a documented path, with the values that make a request reach the route's
// own checks, and the sets of bad values for each.
std::string fill(std::string path, const std::map<std::string, std::string>& values) {
  for (const auto& [from, to] : values) {
    for (auto at = path.find(from); at != std::string::npos; at = path.find(from)) {
      path.replace(at, from.size(), to);
    }
  }
  return path;
}

const std::map<std::string, std::string> kGood = {
    {"{job}", "900"}, {"{node}", "n1"}, {"{id}", "gpu-a-0"}, {"{LEVEL:NAME}", "zone:z1"}};

const std::map<std::string, std::vector<std::string>>& bad_segments() {
  static const auto* m = new std::map<std::string, std::vector<std::string>>{
      {"{job}", kBadJobs},
      {"{node}", kBadNames},
      {"{id}",
       [] {
         std::vector<std::string> v = kBadNames;
         v.push_back("no-such-device");
         return v;
       }()},
      {"{LEVEL:NAME}",
       {"nocolon", "%3ax", "zone%3a", "no-such-level%3ax", "%ff%3ax", "zone%3a%00", "zone%3a%ff",
        "zone%3ano-such-zone", std::string(300, 'z') + "%3ax"}}};
  return *m;
}

// The query parameters a documented path names, in order.
std::vector<std::string> params_of(const std::string& documented) {
  std::vector<std::string> out;
  const auto q = documented.find('?');
  if (q == std::string::npos) return out;
  for (const std::string& pair : split(documented.substr(q + 1), '&')) {
    out.push_back(pair.substr(0, pair.find('=')));
  }
  return out;
}

std::vector<std::string> bad_values_of(const std::string& param) {
  if (param == "job") return kBadJobs;
  if (param == "live") return {"2", "true", "yes", "", "%ff", "1%00"};
  if (param == "state") return {"bogus", "", "%ff", "ready%00", "READY "};
  if (param == "type") return {"cpu", "", "%ff", "gpu%00"};
  static const std::set<std::string> numbers = {"limit",     "top",         "gpus",     "nvme",
                                                "mem_bytes", "since_ms",    "until_ms", "start_ms",
                                                "end_ms",    "time_limit_s"};
  if (numbers.contains(param)) {
    std::vector<std::string> v = kBadNumbers;
    if (param.ends_with("_ms")) v.push_back("4503599627370497");  // past 2^52
    if (param == "limit") v.push_back("4294967296");
    return v;
  }
  return kBadText;  // user, node, zone, workload, partition, qos, account
}

std::vector<Probe> probes_for(const Row& r) {
  std::vector<Probe> out;
  const std::string bare = r.path.substr(0, r.path.find('?'));
  const std::string path = fill(bare, kGood);
  std::string body;
  std::vector<std::string> bodies;
  if (r.method == "PUT" && bare == "/v1/compositions/{job}/{node}") {
    bodies = compose_bodies();
  } else if (r.method == "PUT" && bare == "/v1/compositions/{job}") {
    bodies = job_compose_bodies();
  } else if (r.method == "PUT" && bare == "/v1/policy") {
    bodies = policy_bodies();
  } else if (r.method == "POST" && (bare.ends_with("/drain") || bare.ends_with("/fail"))) {
    bodies = drain_bodies();
  } else if (r.method == "POST") {
    bodies = empty_bodies();
  }
  // A body good enough that the path's own checks are what refuses.
  if (!bodies.empty()) {
    if (r.method == "PUT" && bare == "/v1/compositions/{job}") {
      body = body_of(kComposeBody);
      body.insert(body.size() - 1, ",\"nodes\":[\"n1\"]");
    } else if (r.method == "PUT" && bare.starts_with("/v1/compositions/")) {
      body = body_of(kComposeBody);
    } else if (bare.ends_with("/drain") || bare.ends_with("/fail")) {
      body = "{\"reason\":\"maintenance\"}";
    } else {
      body = "{}";
    }
  }
  for (const std::string& b : bodies) out.push_back({r.method, path, b});
  // Bad path segments, one at a time.
  for (const auto& [placeholder, values] : bad_segments()) {
    if (bare.find(placeholder) == std::string::npos) continue;
    for (const std::string& v : values) {
      std::map<std::string, std::string> m = kGood;
      m[placeholder] = v;
      out.push_back({r.method, fill(bare, m), body});
    }
  }
  // Bad query parameters (GET only takes them), and ones no route takes.
  if (r.method == "GET" && bare != "/metrics" && bare != "/v1/health") {
    for (const std::string& p : params_of(r.path)) {
      for (const std::string& v : bad_values_of(p)) {
        out.push_back({r.method, path + "?" + p + "=" + v, ""});
      }
    }
    for (const char* q : {"bogus=1", "limit%00=1", "%ff=1", "LIMIT=1", "job=1&bogus"}) {
      out.push_back({r.method, path + "?" + std::string(q), ""});
    }
  }
  return out;
}

// What composerd holds, as its answers show it: everything but the audit trail of refusals.
std::string state_of(client::Client& c, const std::string& host, int port,
                     const std::string& munge) {
  std::string out;
  for (const char* path : {"/v1/pool", "/v1/hosts", "/v1/policy/history?limit=0"}) {
    auto r = raw_request(host, port, munge, "GET", path);
    out += std::string(path) + " " + std::to_string(r.status) + " " + r.body + "\n";
  }
  // The lists whole, every page.
  auto compositions = c.compositions();
  EXPECT_TRUE(compositions.ok()) << compositions.error();
  if (compositions.ok()) out += api::to_text(api::compositions_to_json(*compositions)) + "\n";
  auto devices = c.devices();
  EXPECT_TRUE(devices.ok()) << devices.error();
  if (devices.ok()) out += api::to_text(api::devices_to_json(*devices)) + "\n";
  auto events = c.events(client::EventQuery{.limit = 0});
  EXPECT_TRUE(events.ok()) << events.error();
  if (events.ok()) {
    for (const Event& e : *events) {
      if (e.kind == "refused") continue;
      out += std::to_string(e.id) + " " + e.kind + " " + std::to_string(e.owner.job_id) + "\n";
    }
  }
  return out;
}

// The code docs/API.md fixes for a status ("" for a status no route answers with).
std::string code_for(int status) {
  switch (status) {
    case 400:
    case 413:
    case 414:
    case 415:
    case 416:
    case 431:
      return "invalid_argument";
    case 404:
      return "not_found";
    default:
      return "";
  }
}

TEST(ComposerdBadInput, GeneratedBadRequestsAreRefusedAndChangeNothing) {
  const std::vector<Row> routes = documented_routes();
  ASSERT_GE(routes.size(), 15u) << "docs/API.md's Endpoints table was not found";
  ComposerdProcess d("ComposeUsers=daemon\n");
  auto c = d.client();
  // Some state for the refusals to leave alone: two compositions and a drained device.
  ASSERT_TRUE(c.compose(777, "n1",
                        api::ComposeBody{.owner = {.uid = 1000,
                                                   .user = "alice",
                                                   .account = "physics",
                                                   .workload = "training"},
                                         .request = Request{.gpus = 2}})
                  .ok());
  ASSERT_TRUE(c.compose(778, "n2",
                        api::ComposeBody{.owner = {.uid = 1001, .user = "bob"},
                                         .request = Request{.nvme = 1}})
                  .ok());
  ASSERT_TRUE(c.drain("gpu-b-7", "fan").ok());
  const std::string host = "127.0.0.1";
  const int port = d.port();
  const std::string before = state_of(c, host, port, d.munge_socket());

  size_t sent = 0;
  std::map<int, size_t> by_status;
  for (const Row& r : routes) {
    if (r.path == "/metrics" || r.path == "/v1/health") continue;  // take no input
    const std::vector<Probe> probes = probes_for(r);
    EXPECT_GE(probes.size(), 5u) << r.method << " " << r.path << ": too few bad inputs";
    for (const Probe& p : probes) {
      SCOPED_TRACE(p.method + " " + p.path.substr(0, 200) + " body " +
                   printable(p.body.substr(0, 200)));
      const auto answer = raw_request(host, port, d.munge_socket(), p.method, p.path, p.body);
      ++sent;
      ++by_status[answer.status];
      ASSERT_NE(answer.status, 0) << "no answer: composerd is down";
      EXPECT_GE(answer.status, 400) << "a bad input was taken: " << answer.body.substr(0, 300);
      EXPECT_LT(answer.status, 500) << answer.body.substr(0, 300);
      EXPECT_NE(answer.status, 401) << answer.body;  // root's own credential
      EXPECT_NE(answer.status, 403) << answer.body;
      EXPECT_TRUE(valid_utf8(answer.body)) << printable(answer.body);
      Json::Value error;
      std::istringstream in(answer.body);
      ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &error, nullptr))
          << answer.body;
      const std::string code = error["error"]["code"].asString();
      const std::string expected = code_for(answer.status);
      if (!expected.empty()) {
        EXPECT_EQ(code, expected) << answer.body;
      } else if (answer.status == 409) {
        EXPECT_TRUE(code == "conflict" || code == "insufficient_resources") << answer.body;
      }
      EXPECT_FALSE(error["error"]["message"].asString().empty()) << answer.body;
    }
    EXPECT_EQ(state_of(c, host, port, d.munge_socket()), before)
        << r.method << " " << r.path << ": a refused request changed composerd's state";
  }
  ASSERT_TRUE(c.health().ok()) << d.log();
  std::string statuses;
  for (const auto& [status, n] : by_status) {
    statuses += (statuses.empty() ? "" : ", ") + std::to_string(n) + " x " + std::to_string(status);
  }
  std::cout << "bad-input campaign: " << sent << " generated bad requests on " << routes.size() - 2
            << " routes (" << statuses << "), 0 state changes allowed\n";
}

}  // namespace
}  // namespace composer::testing
