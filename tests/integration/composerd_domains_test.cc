// Failure domains in a real composerd: composer.conf's Domains= reach the API's devices, a
// policy's Placement lines are checked against the domains and steer where jobs land, and a
// domain the fabric reports failed gets each hit job its class's reaction (through the
// stand-in scontrol), once.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "composer/api/codec.h"
#include "composer/api/snapshot.h"
#include "composerd_process.h"
#include "fake_slurm.h"

namespace composer::testing {
namespace {

// GPUs in two enclosures, all reachable from n1.
std::string pool() {
  return "DomainLevels=enclosure,power\n"
         "NodeName=n1 Zones=z1 GpuSlots=8 MemSlots=4\n"
         "DeviceGroup=ga Type=gpu Model=A100 Zone=z1 Count=2 Domains=enclosure:enc-a,power:pdu-1\n"
         "DeviceGroup=gb Type=gpu Model=A100 Zone=z1 Count=2 Domains=enclosure:enc-b,power:pdu-1\n";
}

constexpr char kSpread[] =
    "Class=training\nClass=inference\nDefaultClass=inference\n"
    "Placement=training Rule=spread Level=enclosure Count=2\n";

api::ComposeBody body(uint32_t gpus, std::string workload) {
  return api::ComposeBody{.owner = {.uid = 1000,
                                    .user = "alice",
                                    .account = "physics",
                                    .workload = std::move(workload)},
                          .request = Request{.gpus = gpus}};
}

TEST(ComposerdDomains, DevicesCarryTheirDomainsAndSpreadPlacesOverBothEnclosures) {
  ComposerdProcess daemon("Workloads=training,inference\n", pool());
  auto c = daemon.client();
  auto devices = c.devices({});
  ASSERT_TRUE(devices.ok()) << devices.error();
  ASSERT_EQ(devices->size(), 4u);
  for (const Device& d : *devices) {
    ASSERT_NE(d.domain("enclosure"), nullptr) << d.id;
    EXPECT_EQ(d.domain("enclosure")->name, d.id.starts_with("ga") ? "enc-a" : "enc-b");
    EXPECT_EQ(d.domain("power")->name, "pdu-1");
  }

  // A rule that can never be met is refused with the file, line and rule.
  auto bad = c.put_policy(
      {.file = "site.policy",
       .text = std::string(kSpread) + "Placement=inference Rule=spread Level=power Count=2\n"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("site.policy line 5: Placement=inference (spread power 2): "
                                     "the pool has 1 power domain, so a spread over 2 can "
                                     "never be met"),
            std::string::npos)
      << bad.error().message;
  auto undeclared = c.put_policy({.file = "site.policy",
                                  .text = std::string(kSpread) + "Placement=inference "
                                                                 "Rule=avoid-shared Level=rack\n"});
  ASSERT_FALSE(undeclared.ok());
  EXPECT_NE(undeclared.error().message.find("level rack is not declared by composer.conf's "
                                            "DomainLevels= (declared: enclosure, power)"),
            std::string::npos)
      << undeclared.error().message;

  auto applied = c.put_policy({.file = "site.policy", .text = kSpread});
  ASSERT_TRUE(applied.ok()) << applied.error();
  // The snapshot job_submit reads carries the rule and the pool's domains, so a job the rule
  // can never place is refused at submission.
  auto snap = api::read_snapshot(daemon.state_dir() + "/snapshot.json");
  ASSERT_TRUE(snap.ok()) << snap.error();
  const api::WorkloadClass* training = snap->workload_class("training");
  ASSERT_NE(training, nullptr);
  EXPECT_EQ(training->placement, "spread");
  EXPECT_EQ(training->placement_level, "enclosure");
  EXPECT_EQ(training->placement_count, 2u);
  EXPECT_EQ(snap->gpu.domains, (std::map<std::string, uint32_t>{{"enclosure", 2}, {"power", 1}}));
  EXPECT_TRUE(snap->mem.domains.empty());
  auto composed = c.compose(21, "n1", body(2, "training"));
  ASSERT_TRUE(composed.ok()) << composed.error();
  std::set<std::string> enclosures;
  for (const Device& d : composed->devices) enclosures.insert(d.domain("enclosure")->name);
  EXPECT_EQ(enclosures, (std::set<std::string>{"enc-a", "enc-b"}));

  // One free GPU left in each enclosure would do; one enclosure only must wait.
  ASSERT_TRUE(c.compose(22, "n1", body(1, "inference")).ok());
  auto waits = c.compose(23, "n1", body(2, "training"));
  ASSERT_FALSE(waits.ok());
  EXPECT_EQ(waits.error().code, ErrorCode::kInsufficient);
  EXPECT_NE(waits.error().message.find("placement rule 'spread enclosure 2' of class training"),
            std::string::npos)
      << waits.error().message;
}

// A planned maintenance of one enclosure: what it would hit, the drain of the whole domain
// at once, running jobs left to finish, and the word when it is empty.
TEST(ComposerdDomains, ADomainDrainTakesNothingFromRunningJobsAndSaysWhenItIsEmpty) {
  ComposerdProcess daemon("Workloads=training,inference\n", pool());
  auto c = daemon.client();
  // Packing: job 31 (training) takes enc-a's two GPUs, job 32 (inference) one of enc-b's.
  auto training = c.compose(31, "n1", body(2, "training"));
  ASSERT_TRUE(training.ok()) << training.error();
  auto inference = c.compose(32, "n1", body(1, "inference"));
  ASSERT_TRUE(inference.ok()) << inference.error();
  const std::string enc = training->devices[0].domain("enclosure")->name;
  ASSERT_EQ(training->devices[1].domain("enclosure")->name, enc);
  const std::string other = enc == "enc-a" ? "enc-b" : "enc-a";
  ASSERT_EQ(inference->devices[0].domain("enclosure")->name, other);

  // What a failure of the power feed both enclosures share would hit: both jobs, all of
  // each class's running capacity.
  auto power = ctl(daemon, "blast-radius pdu-1 --json");
  ASSERT_EQ(power.code, 0) << power.out;
  auto pj = api::parse_json(power.out);
  ASSERT_TRUE(pj.ok()) << power.out;
  EXPECT_EQ((*pj)["target"].asString(), "power:pdu-1");
  EXPECT_EQ((*pj)["devices"]["total"].asUInt(), 4u);
  EXPECT_EQ((*pj)["devices"]["attached"].asUInt(), 3u);
  ASSERT_EQ((*pj)["compositions"].size(), 2u);
  ASSERT_EQ((*pj)["classes"].size(), 2u);
  for (const auto& cls : (*pj)["classes"]) {
    EXPECT_EQ(cls["share"].asDouble(), 1.0) << cls["workload"].asString();
  }

  // The dry run of the enclosure's drain: job 31 alone, training's whole share, and nothing
  // changes.
  auto dry = ctl(daemon, "devices drain --domain enclosure:" + enc + " --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("enclosure:" + enc +
                         ": failure domain of 2 devices (2 attached, 0 free, "
                         "0 drained, 0 failed, 0 foreign)"),
            std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("WORKLOAD   JOBS_HIT  JOBS  DEVICES_HIT  DEVICES  SHARE\n"
                         "inference         0     1            0        1     0%\n"
                         "training          1     1            2        2   100%\n"),
            std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("users: alice\nnodes: n1\n"), std::string::npos) << dry.out;
  auto untouched = c.devices({});
  ASSERT_TRUE(untouched.ok());
  for (const Device& d : *untouched) EXPECT_FALSE(d.drained) << d.id;

  // Bad targets change nothing and say what there is.
  auto unknown = ctl(daemon, "devices drain --domain enclosure:enc-z --reason fans");
  EXPECT_EQ(unknown.code, 1) << unknown.out;
  EXPECT_NE(unknown.out.find("no device is in failure domain enclosure:enc-z; the pool's domains: "
                             "enclosure:enc-a, enclosure:enc-b, power:pdu-1"),
            std::string::npos)
      << unknown.out;
  auto both = ctl(daemon, "devices drain gpu-1 --domain enclosure:enc-a --reason fans");
  EXPECT_EQ(both.code, 2) << both.out;
  EXPECT_NE(both.out.find("devices drain: give a device ID or --domain, not both"),
            std::string::npos)
      << both.out;
  auto nowhere = ctl(daemon, "blast-radius enc-q");
  EXPECT_EQ(nowhere.code, 1) << nowhere.out;
  EXPECT_NE(nowhere.out.find("'enc-q' is neither a device nor a failure domain"), std::string::npos)
      << nowhere.out;

  // The drain: both GPUs at once, job 31 keeps them until it ends.
  auto drained = ctl(daemon, "devices drain --domain enclosure:" + enc + " --reason 'fan swap'");
  ASSERT_EQ(drained.code, 0) << drained.out;
  EXPECT_NE(drained.out.find("enclosure:" + enc +
                             ": drained; 1 running job keeps its devices until it ends (jobs 31)"),
            std::string::npos)
      << drained.out;
  auto after = c.devices({});
  ASSERT_TRUE(after.ok());
  for (const Device& d : *after) {
    EXPECT_EQ(d.drained, d.domain("enclosure")->name == enc) << d.id;
    if (d.drained) {
      EXPECT_EQ(d.drain_reason, "fan swap");
      EXPECT_TRUE(d.composition_id.has_value()) << d.id << " was taken from job 31";
    }
  }
  // No new composition lands there: one GPU is free, in the other enclosure.
  EXPECT_FALSE(c.compose(33, "n1", body(2, "inference")).ok());

  // Job 31 ends: the log and blast-radius say the enclosure is empty.
  ASSERT_TRUE(c.release(31, "n1").ok());
  auto empty = ctl(daemon, "blast-radius enclosure:" + enc);
  ASSERT_EQ(empty.code, 0) << empty.out;
  EXPECT_NE(empty.out.find("no live composition uses it; drained and empty: ready for "
                           "maintenance"),
            std::string::npos)
      << empty.out;
  EXPECT_NE(daemon.log().find("failure domain drained and empty: no composition uses it"),
            std::string::npos)
      << daemon.log();
  EXPECT_NE(daemon.log().find("enclosure:" + enc), std::string::npos);

  // Every drain is in the ledger, one event per device, with the admin's reason.
  auto events = c.events({});
  ASSERT_TRUE(events.ok()) << events.error();
  int drains = 0;
  for (const Event& e : *events) {
    if (e.kind == "drain") {
      ++drains;
      EXPECT_EQ(e.detail, "fan swap");
    }
  }
  EXPECT_EQ(drains, 2);

  // Resumed as a whole, the enclosure serves again.
  auto resumed = ctl(daemon, "devices resume --domain enclosure:" + enc + " -P");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(c.compose(34, "n1", body(2, "inference")).ok());
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string scrape(const ComposerdProcess& d) {
  const auto url = d.url();
  httplib::Client cli("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
  auto r = cli.Get("/metrics");
  return r ? r->body : "";
}

// The reaction events of a job ("requeued", "degraded", "failure_ignored").
std::vector<Event> reactions(const client::Client& c, uint32_t job) {
  std::vector<Event> out;
  auto events = c.events({.job = job});
  EXPECT_TRUE(events.ok()) << events.error();
  if (!events) return out;
  for (const Event& e : *events) {
    if (e.kind == "requeued" || e.kind == "degraded" || e.kind == "failure_ignored")
      out.push_back(e);
  }
  return out;
}

// A whole enclosure fails, as the fabric reports it: exactly the jobs holding its devices get
// their class's reaction (training requeued, inference notified), once; the job elsewhere is
// left alone; the ledger agrees with what blast-radius said the failure would hit, and
// /metrics counts the failed devices and hit jobs of the domain.
TEST(ComposerdDomains, AFailedEnclosureGetsExactlyTheJobsOnItTheirClassReaction) {
  test_support::TempDir files("composer-domain-failure");
  const std::string slurm = fake_slurm_dir(files);
  const std::string health = files.file("sim-health");
  std::ofstream(health) << "";
  ComposerdProcess daemon(
      "Workloads=training,inference\nSimHealthFile=" + health + "\n" + fake_slurm_conf(), pool());
  auto c = daemon.client();
  auto applied = c.put_policy({.file = "site.policy",
                               .text = "Class=training\nClass=inference\nDefaultClass=inference\n"
                                       "OnFailure=training Action=requeue MaxRequeues=2\n"
                                       "OnFailure=inference Action=notify\n"});
  ASSERT_TRUE(applied.ok()) << applied.error();
  // Packing: job 41 takes one enclosure's two GPUs, jobs 42 and 43 share the other.
  auto big = c.compose(41, "n1", body(2, "training"));
  ASSERT_TRUE(big.ok()) << big.error();
  auto infer = c.compose(42, "n1", body(1, "inference"));
  ASSERT_TRUE(infer.ok()) << infer.error();
  auto small = c.compose(43, "n1", body(1, "training"));
  ASSERT_TRUE(small.ok()) << small.error();
  const std::string hit = infer->devices[0].domain("enclosure")->name;
  ASSERT_EQ(small->devices[0].domain("enclosure")->name, hit);
  ASSERT_NE(big->devices[0].domain("enclosure")->name, hit);

  // What its failure would hit, asked before it fails.
  auto radius = ctl(daemon, "blast-radius enclosure:" + hit + " --json");
  ASSERT_EQ(radius.code, 0) << radius.out;
  auto rj = api::parse_json(radius.out);
  ASSERT_TRUE(rj.ok()) << radius.out;
  std::set<uint32_t> would_hit;
  for (const auto& comp : (*rj)["compositions"]) would_hit.insert(comp["job_id"].asUInt());
  EXPECT_EQ(would_hit, (std::set<uint32_t>{42, 43})) << radius.out;

  // The fabric reports every device of the enclosure critical.
  auto devices = c.devices({});
  ASSERT_TRUE(devices.ok()) << devices.error();
  std::string lines;
  for (const Device& d : *devices) {
    if (d.domain("enclosure")->name == hit) lines += d.id + " critical\n";
  }
  std::ofstream(health) << lines;

  std::vector<Event> requeued;
  for (int i = 0; i < 200 && (requeued.empty() || reactions(c, 42).empty()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    requeued = reactions(c, 43);
  }
  ASSERT_EQ(requeued.size(), 1u) << daemon.log();
  EXPECT_EQ(requeued[0].kind, "requeued");
  EXPECT_NE(requeued[0].detail.find("device " + small->devices[0].id + " failed (enclosure:" + hit +
                                    ", power:pdu-1); class training reacts with "
                                    "requeue: job 43 requeued through Slurm (1 of at most "
                                    "2)"),
            std::string::npos)
      << requeued[0].detail;
  const auto notified = reactions(c, 42);
  ASSERT_EQ(notified.size(), 1u);
  EXPECT_EQ(notified[0].kind, "degraded");
  EXPECT_NE(notified[0].detail.find("class inference reacts with notify: it keeps running, "
                                    "degraded"),
            std::string::npos)
      << notified[0].detail;
  EXPECT_TRUE(reactions(c, 41).empty());

  // The ledger's jobs are the ones blast-radius named.
  std::set<uint32_t> reacted;
  auto all = c.events({});
  ASSERT_TRUE(all.ok());
  for (const Event& e : *all) {
    if (e.kind == "requeued" || e.kind == "degraded" || e.kind == "failure_ignored")
      reacted.insert(e.owner.job_id);
  }
  EXPECT_EQ(reacted, would_hit);

  // Slurm was asked once per job: requeue for 43, a message for 42, nothing for 41; more
  // rounds change nothing.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::string calls = slurp(slurm + "/calls");
  EXPECT_NE(calls.find("requeue 43\n"), std::string::npos) << calls;
  EXPECT_NE(calls.find("notify 42 slurm-composer: device " + infer->devices[0].id +
                       " failed (enclosure:" + hit +
                       ", power:pdu-1); job 42 keeps running "
                       "without it\n"),
            std::string::npos)
      << calls;
  EXPECT_EQ(calls.find("41"), std::string::npos) << calls;
  size_t requeues = 0;
  for (size_t at = calls.find("requeue "); at != std::string::npos;
       at = calls.find("requeue ", at + 1)) {
    ++requeues;
  }
  EXPECT_EQ(requeues, 1u) << calls;

  const std::string m = scrape(daemon);
  EXPECT_NE(
      m.find("composer_domain_failed_devices{level=\"enclosure\",domain=\"" + hit + "\"} 2\n"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("composer_domain_affected_jobs{level=\"enclosure\",domain=\"" + hit + "\"} 2\n"),
            std::string::npos)
      << m;
  const std::string spared = hit == "enc-a" ? "enc-b" : "enc-a";
  EXPECT_NE(
      m.find("composer_domain_affected_jobs{level=\"enclosure\",domain=\"" + spared + "\"} 0\n"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("composer_domain_affected_jobs{level=\"power\",domain=\"pdu-1\"} 2\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("composer_failure_reactions_total{reaction=\"requeued\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("composer_failure_reactions_total{reaction=\"degraded\"} 1\n"),
            std::string::npos)
      << m;
}

// Hosts sit in domains too (NodeName Domains=): the API's hosts carry them, and a switch's
// blast radius is every composition on the hosts behind it, whatever their devices.
TEST(ComposerdDomains, ASwitchsBlastRadiusIsEveryCompositionOnItsHosts) {
  ComposerdProcess daemon(
      "Workloads=training,inference\n",
      "DomainLevels=enclosure,power,switch\n"
      "NodeName=n1 Zones=z1 GpuSlots=8 Domains=switch:sw-1\n"
      "NodeName=n2 Zones=z1 GpuSlots=8 Domains=switch:sw-2,power:pdu-1\n"
      "DeviceGroup=ga Type=gpu Model=A100 Zone=z1 Count=2 Domains=enclosure:enc-a,power:pdu-1\n"
      "DeviceGroup=gb Type=gpu Model=A100 Zone=z1 Count=2 Domains=enclosure:enc-b,power:pdu-1\n");
  auto c = daemon.client();
  auto hosts = c.hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].domains, (std::vector<FailureDomain>{{"switch", "sw-1"}}));
  EXPECT_EQ((*hosts)[1].domains,
            (std::vector<FailureDomain>{{"power", "pdu-1"}, {"switch", "sw-2"}}));
  ASSERT_TRUE(c.compose(51, "n1", body(1, "training")).ok());
  ASSERT_TRUE(c.compose(52, "n2", body(2, "inference")).ok());

  auto sw1 = ctl(daemon, "blast-radius switch:sw-1 --json");
  ASSERT_EQ(sw1.code, 0) << sw1.out;
  auto j = api::parse_json(sw1.out);
  ASSERT_TRUE(j.ok()) << sw1.out;
  EXPECT_EQ((*j)["target"].asString(), "switch:sw-1");
  EXPECT_EQ((*j)["devices"]["total"].asUInt(), 0u);
  ASSERT_EQ((*j)["hosts"].size(), 1u);
  EXPECT_EQ((*j)["hosts"][0].asString(), "n1");
  ASSERT_EQ((*j)["compositions"].size(), 1u) << sw1.out;
  EXPECT_EQ((*j)["compositions"][0]["job_id"].asUInt(), 51u);
  EXPECT_EQ((*j)["compositions"][0]["devices_hit"].size(), 1u);

  // A domain of devices and hosts alike: the power feed hits both jobs.
  auto pdu = ctl(daemon, "blast-radius pdu-1");
  ASSERT_EQ(pdu.code, 0) << pdu.out;
  EXPECT_NE(pdu.out.find("power:pdu-1: failure domain of 4 devices"), std::string::npos) << pdu.out;
  EXPECT_NE(pdu.out.find("hosts in it: n2\n"), std::string::npos) << pdu.out;
  EXPECT_NE(pdu.out.find("nodes: n1, n2\n"), std::string::npos) << pdu.out;
}

}  // namespace
}  // namespace composer::testing
