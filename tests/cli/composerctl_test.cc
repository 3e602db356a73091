#include "composer/cli/composerctl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <regex>
#include <sstream>

#include <sys/stat.h>

#include <fstream>

#include "composer/api/codec.h"
#include "composer/common/units.h"
#include "composer/db/store.h"
#include "composer/test_support/munge_daemon.h"
#include "composer/test_support/pg_server.h"
#include "composer/test_support/ports.h"
#include "composer/test_support/temp_dir.h"
#include "composer/test_support/test_server.h"

namespace composer::cli {
namespace {

using composer::testing::TestServer;
using test_support::MungeDaemon;

struct Outcome {
  int rc = -1;
  std::string out;
  std::string err;
};

Device gpu(const std::string& id, bool attached) {
  Device d;
  d.id = id;
  d.model = "A100-80G";
  d.zone = "z1";
  d.address = "0000:41:00.0";
  if (attached) {
    d.composition_id = 12;
    d.node = "node1";
    d.domains = {{"enclosure", "enc1"}, {"power", "pdu-a"}};
  }
  return d;
}

void answer(httplib::Response& res, const Json::Value& body, int status = 200) {
  res.status = status;
  res.set_content(api::to_text(body), "application/json");
}

class ComposerctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = MungeDaemon::start();
    ASSERT_TRUE(d.ok()) << d.error();
    munge_ = std::move(*d).release();
  }
  static void TearDownTestSuite() {
    delete munge_;
    munge_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(munge_, nullptr);
    ::unsetenv("COMPOSER_SERVER");
    ::unsetenv("COMPOSER_MUNGE_SOCKET");
    server_.server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req.method + " " + req.target);
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.server.Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
      answer(res, api::pool_to_json({{.type = DeviceType::kGpu,
                                      .model = "A100-80G",
                                      .zone = "z1",
                                      .total = 8,
                                      .free = 6,
                                      .attached = 2},
                                     {.type = DeviceType::kNvme,
                                      .model = "P5620",
                                      .zone = "z2",
                                      .total = 4,
                                      .free = 4,
                                      .total_bytes = 4 * 8 * kTiB,
                                      .free_bytes = 4 * 8 * kTiB,
                                      .schedulable_bytes = 4 * 8 * kTiB}}));
    });
    server_.server.Get("/v1/devices", [](const httplib::Request&, httplib::Response& res) {
      answer(res, api::devices_to_json({gpu("gpu-a-00", true), gpu("gpu-a-01", false)}));
    });
    server_.server.Post("/v1/devices/gpu-a-01/drain",
                        [](const httplib::Request& req, httplib::Response& res) {
                          auto body = api::from_text<api::DrainBody>(req.body);
                          if (!body) return answer(res, api::to_json(body.error()), 400);
                          Device d = gpu("gpu-a-01", false);
                          d.drained = true;
                          d.drain_reason = body->reason;
                          answer(res, api::to_json(d));
                        });
    server_.server.Delete("/v1/compositions/4711/node1",
                          [](const httplib::Request&, httplib::Response& res) {
                            answer(res, api::release_to_json(std::nullopt));
                          });
    server_.server.Get("/v1/compositions/4711/node9", [](const httplib::Request&,
                                                         httplib::Response& res) {
      answer(res, api::to_json(Error{ErrorCode::kNotFound, "job 4711 has no composition on node9"}),
             404);
    });
  }

  Outcome run_ctl(std::vector<std::string> args, bool with_server = true) {
    std::vector<std::string> all = {"composerctl"};
    if (with_server) all.insert(all.end(), {"--server", server_.url()});
    all.insert(all.end(), {"--munge-socket", munge_->socket_path()});
    all.insert(all.end(), args.begin(), args.end());
    std::vector<const char*> argv;
    for (const std::string& a : all) argv.push_back(a.c_str());
    std::ostringstream out, err;
    Outcome o;
    o.rc = run(static_cast<int>(argv.size()), argv.data(), out, err);
    o.out = out.str();
    o.err = err.str();
    return o;
  }

  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  static MungeDaemon* munge_;
  TestServer server_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

MungeDaemon* ComposerctlTest::munge_ = nullptr;

TEST_F(ComposerctlTest, PoolPrintsAnAlignedTable) {
  Outcome o = run_ctl({"pool"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(o.out,
            "TYPE  MODEL     ZONE  TOTAL  FREE  ATTACHED  DRAINED  FAILED  FOREIGN  TOTAL_SIZE  "
            "FREE_SIZE\n"
            "gpu   A100-80G  z1        8     6         2        0       0        0\n"
            "nvme  P5620     z2        4     4         0        0       0        0         32T     "
            "   32T\n");
}

TEST_F(ComposerctlTest, PoolByDomainCountsEachDeviceInEachOfItsDomains) {
  Outcome o = run_ctl({"pool", "--by", "domain", "-P"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out,
            "LEVEL|DOMAIN|TYPE|TOTAL|FREE|ATTACHED|DRAINED|FAILED|FOREIGN|TOTAL_SIZE|FREE_SIZE\n"
            "|(none)|gpu|1|1|0|0|0|0||\n"
            "enclosure|enc1|gpu|1|0|1|0|0|0||\n"
            "power|pdu-a|gpu|1|0|1|0|0|0||\n");
  EXPECT_EQ(requests(), (std::vector<std::string>{"GET /v1/devices"}));

  o = run_ctl({"pool", "--by", "domain", "--json"});
  EXPECT_EQ(o.rc, 0) << o.err;
  auto back = api::parse_json(o.out);
  ASSERT_TRUE(back.ok()) << back.error();
  ASSERT_EQ((*back)["domains"].size(), 3u);
  EXPECT_EQ((*back)["domains"][1]["domain"].asString(), "enc1");
  EXPECT_EQ((*back)["domains"][1]["attached"].asUInt(), 1u);

  o = run_ctl({"pool", "--by", "rack"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("--by: 'rack' is not one of zone, domain"), std::string::npos) << o.err;
}

TEST_F(ComposerctlTest, ParsableAndNoheaderMayFollowTheSubcommand) {
  Outcome o = run_ctl({"devices", "list", "--type", "gpu", "-P", "--noheader"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out,
            "gpu-a-00|gpu|A100-80G||z1|0000:41:00.0|ok|attached|node1|12|||"
            "enclosure:enc1,power:pdu-a\n"
            "gpu-a-01|gpu|A100-80G||z1|0000:41:00.0|ok|free|||||\n");
  EXPECT_EQ(requests(), (std::vector<std::string>{"GET /v1/devices?type=gpu"}));
}

TEST_F(ComposerctlTest, JsonPrintsTheApiObjects) {
  Outcome o = run_ctl({"--json", "devices"});
  EXPECT_EQ(o.rc, 0) << o.err;
  auto back = api::parse_json(o.out);
  ASSERT_TRUE(back.ok()) << back.error();
  auto devices = api::devices_from_json(*back);
  ASSERT_TRUE(devices.ok()) << devices.error();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ(devices->at(0).node, "node1");
}

TEST_F(ComposerctlTest, DrainSendsTheReasonAndPrintsTheDevice) {
  Outcome o = run_ctl({"devices", "drain", "gpu-a-01", "--reason", "fan failure", "-P"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out,
            "ID|TYPE|MODEL|SIZE|ZONE|ADDRESS|HEALTH|STATE|NODE|COMPOSITION|HOLDER|REASON|DOMAINS\n"
            "gpu-a-01|gpu|A100-80G||z1|0000:41:00.0|ok|drained||||fan failure|\n");
}

TEST_F(ComposerctlTest, ReleaseOfNothingSaysSo) {
  Outcome o = run_ctl({"compositions", "release", "4711", "node1"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "job 4711 holds no composition on node1; nothing to release\n");
  o = run_ctl({"compositions", "release", "4711", "node1", "--json"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "{\n  \"released\" : false\n}\n");
}

TEST_F(ComposerctlTest, ServerErrorIsOneLineOnStderrAndExitOne) {
  Outcome o = run_ctl({"compositions", "show", "4711", "node9"});
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "composerctl: error: job 4711 has no composition on node9\n");
}

TEST_F(ComposerctlTest, UnreachableServerExitsOneNamingTheUrl) {
  const std::string url = "http://127.0.0.1:" + std::to_string(test_support::free_port());
  ::setenv("COMPOSER_SERVER", url.c_str(), 1);
  Outcome o = run_ctl({"pool"}, /*with_server=*/false);
  ::unsetenv("COMPOSER_SERVER");
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.err.rfind("composerctl: error: cannot connect to " + url + "/v1/pool", 0), 0u)
      << o.err;
}

TEST_F(ComposerctlTest, ServerListGoesFromAStandbyToTheActiveOne) {
  TestServer standby;
  standby.server.Get("/v1/pool", [&](const httplib::Request&, httplib::Response& res) {
    Json::Value body = api::to_json(Error{ErrorCode::kUnavailable, "a standby"});
    body["active"] = server_.url();
    answer(res, body, 503);
  });
  ::setenv("COMPOSER_SERVER", (standby.url() + "," + server_.url()).c_str(), 1);
  Outcome o = run_ctl({"pool", "-P"}, /*with_server=*/false);
  ::unsetenv("COMPOSER_SERVER");
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(requests(), (std::vector<std::string>{"GET /v1/pool"}));
}

TEST_F(ComposerctlTest, BadServerListIsAUsageErrorNamingWhereItCameFrom) {
  ::setenv("COMPOSER_SERVER", "http://ctl1:6830,,http://ctl2:6830", 1);
  Outcome o = run_ctl({"pool"}, /*with_server=*/false);
  ::unsetenv("COMPOSER_SERVER");
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err.rfind("composerctl: error: $COMPOSER_SERVER: server list "
                        "'http://ctl1:6830,,http://ctl2:6830': an empty entry; expected",
                        0),
            0u)
      << o.err;
  o = run_ctl({"--server", "http://ctl1:6830,ctl2", "pool"}, /*with_server=*/false);
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err.rfind("composerctl: error: --server: server list 'http://ctl1:6830,ctl2': "
                        "'ctl2' is not a URL",
                        0),
            0u)
      << o.err;
  EXPECT_TRUE(requests().empty());
}

// state copy-to-postgresql against a real PostgreSQL (pg_server.h), from a SQLite store made
// by the store itself.
TEST_F(ComposerctlTest, StateCopyToPostgresqlCopiesAndNeverShowsThePassword) {
  std::string why;
  bool installed = true;
  test_support::PgServer* pg = test_support::PgServer::shared(why, installed);
  if (!installed) GTEST_SKIP() << why;
  ASSERT_NE(pg, nullptr) << why;
  test_support::TempDir dir("composerctl-copy");
  const std::string database = dir.file("composer.db");
  {
    auto store = db::Store::open(database);
    ASSERT_TRUE(store.ok()) << store.error();
    Host h;
    h.node = "node1";
    ASSERT_TRUE((*store)->upsert_hosts({h}).ok());
  }
  const std::string url_file = dir.file("state.url");
  std::ofstream(url_file) << pg->fresh_database() << " password=hunter2-secret\n";
  ASSERT_EQ(::chmod(url_file.c_str(), 0644), 0);
  const std::vector<std::string> args = {"state",  "copy-to-postgresql", "--database",
                                         database, "--url-file",         url_file};
  Outcome o = run_ctl(args, /*with_server=*/false);
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find(url_file), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("chmod 600"), std::string::npos) << o.err;

  ASSERT_EQ(::chmod(url_file.c_str(), 0600), 0);
  o = run_ctl(args, /*with_server=*/false);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("composerctl: hosts: 1 rows copied\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("both hold the same 0 live compositions and 0 device claims. Set "
                       "StateBackend=postgresql and StateUrlFile=" +
                       url_file),
            std::string::npos)
      << o.out;
  o = run_ctl(args, /*with_server=*/false);
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.err,
            "composerctl: error: the PostgreSQL store is not empty (hosts has 1 rows): copy into "
            "a new database (createdb -O composer composer)\n");
  EXPECT_EQ((o.out + o.err).find("hunter2"), std::string::npos);
  test_support::PgServer::stop_shared();
}

TEST_F(ComposerctlTest, ServerComesFromTheEnvironmentWhenNotGiven) {
  ::setenv("COMPOSER_SERVER", server_.url().c_str(), 1);
  Outcome o = run_ctl({"pool", "-P"}, /*with_server=*/false);
  ::unsetenv("COMPOSER_SERVER");
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(requests(), (std::vector<std::string>{"GET /v1/pool"}));
}

TEST_F(ComposerctlTest, UsageErrorsExitTwoAndSendNothing) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"pool", "--bogus"},
      {"frobnicate"},
      {"devices", "--type", "fpga"},
      {"compositions", "--state", "done"},
      {"compositions", "--job", "-1"},
      {"compositions", "show", "abc", "node1"},
      {"compositions", "show", "4711"},
      {"devices", "drain", "gpu-a-01"},
      {"events", "--since", "later"},
      {"events", "--until", "2024-05-01 08:00"},
      {"pool", "-P", "--json"},
      {"-P", "pool", "--json"},
      {"pool", "-o", "type,colour"},
      {"devices", "drain", "gpu-a-01", "--reason", "x", "-o", "nope"},
      {"pool", "-o", "type", "--json"},
      {"--server", "localhost:6830", "pool"},
  };
  for (const auto& args : bad) {
    Outcome o = run_ctl(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(o.rc, 2) << joined << "\n" << o.err;
    EXPECT_EQ(o.err.rfind("composerctl: error: ", 0), 0u) << joined << "\n" << o.err;
    EXPECT_NE(o.err.find("Run 'composerctl --help' for usage."), std::string::npos) << o.err;
  }
  // Commands with their own usage line.
  for (const auto& [args, usage] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"report", "-o", "colour"}, "report"},
           {{"policy", "history", "-o", "colour"}, "policy"},
           {{"policy", "explain", "--time-limit", "60", "-o", "sha256"}, "policy"},
           {{"policy", "explain", "--time-limit", "60", "--start", "later"}, "policy"},
           {{"policy", "apply", "p.policy", "-P"}, "policy"}}) {
    Outcome o = run_ctl(args);
    EXPECT_EQ(o.rc, 2) << args[1] << "\n" << o.err;
    EXPECT_EQ(o.err.rfind("composerctl: error: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find("Run 'composerctl " + usage + " --help' for usage."), std::string::npos)
        << o.err;
  }
  EXPECT_TRUE(requests().empty());
  EXPECT_EQ(run_ctl({"devices", "--type", "fpga"}).err,
            "composerctl: error: --type: 'fpga' is not one of gpu, mem, nvme\n"
            "Run 'composerctl --help' for usage.\n");
  EXPECT_EQ(run_ctl({"pool", "-o", "type,colour"}).err,
            "composerctl: error: -o/--format: no field 'colour'; the fields are TYPE,MODEL,ZONE,"
            "TOTAL,FREE,ATTACHED,DRAINED,FAILED,FOREIGN,TOTAL_SIZE,FREE_SIZE (any case)\n"
            "Run 'composerctl --help' for usage.\n");
}

TEST_F(ComposerctlTest, FormatChoosesTheFieldsAndNoheaderItsShortForm) {
  Outcome o = run_ctl({"pool", "-o", "type,Free,total%6"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out,
            "TYPE  FREE   TOTAL\n"
            "gpu      6       8\n"
            "nvme     4       4\n");
  o = run_ctl({"-n", "--format=id,state", "devices", "-P"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "gpu-a-00|attached\ngpu-a-01|free\n");
}

TEST_F(ComposerctlTest, SlurmConfigHonoursParsableAndJson) {
  server_.server.Get("/v1/hosts", [](const httplib::Request&, httplib::Response& res) {
    Host h;
    h.node = "node1";
    h.fabric_id = "h1";
    h.zones = {"z1"};
    h.gpu_slots = 4;
    h.nvme_slots = 2;
    answer(res, api::hosts_to_json({h}));
  });
  // How composerd keeps the pool's licenses: slurm.conf's (local), then slurmdbd's (remote).
  std::string licenses_kept = "local";
  server_.server.Get("/v1/health", [&](const httplib::Request&, httplib::Response& res) {
    api::HealthInfo info{"ok", "sim", "0.1.0", 61};
    info.slurm_licenses = licenses_kept;
    if (licenses_kept == "remote") info.license_server = "fab";
    answer(res, api::to_json(info));
  });
  Outcome o = run_ctl({"slurm-config"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("Licenses=fabric_gpu:8,fabric_mem:0,fabric_nvme:4,fabric_gpu_a100-80g:8\n"),
            std::string::npos)
      << o.out;
  o = run_ctl({"slurm-config", "-P"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out,
            "FILE|NODES|SETTING\n"
            "slurm.conf||Licenses=fabric_gpu:8,fabric_mem:0,fabric_nvme:4,fabric_gpu_a100-80g:8\n"
            "slurm.conf||GresTypes=cgpu,cmem,cnvme\n"
            "slurm.conf||JobSubmitPlugins=composer\n"
            "slurm.conf|node1|Gres=cgpu:4,cmem:0,cnvme:2\n"
            "gres.conf|node1|Name=cgpu Count=4\n"
            "gres.conf|node1|Name=cmem Count=0\n"
            "gres.conf|node1|Name=cnvme Count=2\n"
            "slurm.conf||PrologFlags=Alloc\n"
            "slurm.conf||SchedulerParameters=bf_licenses\n"
            "slurm.conf||AccountingStorageTRES=license/fabric_gpu,license/fabric_mem,"
            "license/fabric_nvme,license/fabric_gpu_a100-80g,gres/cgpu,gres/cmem,gres/cnvme\n"
            "composerd||reservations hold_fabric_gpu, hold_fabric_mem, hold_fabric_nvme, "
            "hold_fabric_gpu_a100-80g (what the pool cannot serve) and the policy's blocker and "
            "cap holds (composerctl policy apply)\n");
  o = run_ctl({"slurm-config", "--json"});
  EXPECT_EQ(o.rc, 0) << o.err;
  auto json = api::parse_json(o.out);
  ASSERT_TRUE(json.ok()) << json.error();
  EXPECT_EQ((*json)["licenses"]["fabric_gpu"].asUInt64(), 8u);
  EXPECT_EQ((*json)["nodes"][0]["nodes"][0].asString(), "node1");
  EXPECT_EQ((*json)["nodes"][0]["cgpu"].asUInt(), 4u);

  // Remote licenses: no Licenses= for the pool, allow_zero_lic, the names Slurm gives them.
  licenses_kept = "remote";
  o = run_ctl({"slurm-config", "-P"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out.find("||Licenses="), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("slurm.conf||SchedulerParameters=bf_licenses,allow_zero_lic\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("AccountingStorageTRES=license/fabric_gpu@fab,license/fabric_mem@fab,"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("composerd||slurmdbd's remote licenses fabric_gpu@fab, "), std::string::npos)
      << o.out;
  o = run_ctl({"slurm-config"});
  EXPECT_NE(o.out.find("# fabric_gpu@fab:8,fabric_mem@fab:0,fabric_nvme@fab:4,"
                       "fabric_gpu_a100-80g@fab:8 now; no Licenses= line for them."),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("\nAccountingStorageTRES="), std::string::npos) << o.out;
  o = run_ctl({"slurm-config", "--json"});
  json = api::parse_json(o.out);
  ASSERT_TRUE(json.ok()) << json.error();
  EXPECT_EQ((*json)["license_server"].asString(), "fab");
  EXPECT_EQ((*json)["licenses"]["fabric_gpu@fab"].asUInt64(), 8u);
}

TEST_F(ComposerctlTest, VersionPrintsTheProjectVersion) {
  Outcome o = run_ctl({"-V"});
  EXPECT_EQ(o.rc, 0);
  EXPECT_EQ(o.out, std::string("composerctl ") + COMPOSER_VERSION + "\n");
  EXPECT_EQ(run_ctl({"--version"}).out, o.out);
}

TEST_F(ComposerctlTest, EveryCommandsHelpListsTheOutputOptionsItHonours) {
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"pool"},
                                             {"devices"},
                                             {"devices", "drain"},
                                             {"compositions", "show"},
                                             {"health"},
                                             {"events"},
                                             {"slurm-config"},
                                             {"report"},
                                             {"policy", "history"},
                                             {"policy", "explain"}}) {
    std::vector<std::string> args = command;
    args.push_back("--help");
    Outcome o = run_ctl(args);
    EXPECT_EQ(o.rc, 0) << args[0];
    // CLI11 2.3 prints "-P,--parsable", 2.4 and later align the long names: "-P,     --parsable".
    for (const char* option :
         {R"(-P,\s*--parsable)", "--json", R"(-o,\s*--format)", R"(-n,\s*--noheader)"}) {
      EXPECT_TRUE(std::regex_search(o.out, std::regex(option))) << args[0] << " " << option << "\n"
                                                                << o.out;
    }
  }
  Outcome apply = run_ctl({"policy", "apply", "--help"});
  EXPECT_NE(apply.out.find("--json"), std::string::npos) << apply.out;
  EXPECT_EQ(apply.out.find("--parsable"), std::string::npos) << apply.out;
}

TEST_F(ComposerctlTest, HelpExitsZero) {
  Outcome o = run_ctl({"--help"});
  EXPECT_EQ(o.rc, 0);
  EXPECT_NE(o.out.find("compositions"), std::string::npos);
  o = run_ctl({"devices", "--help"});
  EXPECT_EQ(o.rc, 0);
  EXPECT_NE(o.out.find("drain"), std::string::npos);
}

TEST_F(ComposerctlTest, HealthExitsOneUnlessOk) {
  std::string status = "ok";
  server_.server.Get("/v1/health", [&](const httplib::Request&, httplib::Response& res) {
    answer(res, api::to_json(api::HealthInfo{status, "sim", "0.1.0", 61}));
  });
  Outcome o = run_ctl({"health", "-P", "--noheader"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "ok|sim|0.1.0|00:01:01|\n");
  status = "degraded";
  o = run_ctl({"health", "-P", "--noheader"});
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.out, "degraded|sim|0.1.0|00:01:01|\n");
}

// --page-size is the page each request asks for; composerctl still reads every page.
TEST_F(ComposerctlTest, PageSizeIsAskedPerRequestAndEveryPageIsRead) {
  server_.server.Get("/v1/compositions", [](const httplib::Request& req, httplib::Response& res) {
    Composition c;
    c.id = req.has_param("cursor") ? 1 : 2;
    c.owner.job_id = 7;
    c.node = "n1";
    api::CompositionPage page{{c}, req.has_param("cursor") ? "" : "2"};
    answer(res, api::to_json(page));
  });
  Outcome o = run_ctl({"compositions", "--page-size", "1", "-P", "-o", "ID"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "ID\n2\n1\n");
  auto seen = requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "GET /v1/compositions?limit=1");
  EXPECT_EQ(seen[1], "GET /v1/compositions?limit=1&cursor=2");
  for (const char* bad : {"0", "10001", "many"}) {
    o = run_ctl({"devices", "--page-size", bad});
    EXPECT_EQ(o.rc, 2) << bad;
    EXPECT_NE(
        o.err.find("--page-size=" + std::string(bad) + ": expected a whole number from 1 to 10000"),
        std::string::npos)
        << o.err;
  }
}

TEST_F(ComposerctlTest, ListFiltersBecomeQueryParameters) {
  server_.server.Get("/v1/compositions", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::compositions_to_json({}));
  });
  server_.server.Get("/v1/events", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::events_to_json({}));
  });
  Outcome o = run_ctl(
      {"compositions", "--job", "4711", "--live", "--state", "ready", "--limit", "10", "-P"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(
      o.out,
      "ID|JOBID|NODE|USER|ACCOUNT|WORKLOAD|STATE|REQUEST|MEMPOLICY|DEVICES|CREATED|ERROR|HOLD\n");
  o = run_ctl({"events", "--job", "4711", "--since", "2024-05-01", "--limit", "5"});
  EXPECT_EQ(o.rc, 0) << o.err;
  // The same time grammar as report -S: Slurm's.
  o = run_ctl({"events", "--since", "yesterday", "--until", "now+1hour"});
  EXPECT_EQ(o.rc, 0) << o.err;
  auto seen = requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], "GET /v1/compositions?job=4711&state=ready&live=1&limit=10");
  EXPECT_EQ(seen[1].rfind("GET /v1/events?job=4711&since_ms=", 0), 0u) << seen[1];
  EXPECT_NE(seen[1].find("&limit=5"), std::string::npos) << seen[1];
}

}  // namespace
}  // namespace composer::cli
