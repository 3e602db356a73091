#include "store_fixture.h"

#include <libpq-fe.h>

#include <stdexcept>

#include "composer/test_support/pg_server.h"

namespace composer::db::testing {

Device make_device(const std::string& id, DeviceType type, const std::string& zone) {
  Device d;
  d.id = id;
  d.type = type;
  d.model = type == DeviceType::kGpu ? "A100-80G" : type == DeviceType::kMem ? "CXL-DDR5" : "P5620";
  d.capacity_bytes = type == DeviceType::kGpu ? 0 : (uint64_t{64} << 30);
  d.zone = zone;
  d.address = "0000:41:00.0";
  return d;
}

Host make_host(const std::string& node) {
  Host h;
  h.node = node;
  h.fabric_id = "fab-" + node;
  h.zones = {"z1", "z2"};
  h.gpu_slots = 8;
  h.mem_slots = 4;
  h.nvme_slots = 2;
  return h;
}

Composition make_composition(uint32_t job_id, const std::string& node, CompositionState state) {
  Composition c;
  c.owner.job_id = job_id;
  c.node = node;
  c.owner.uid = 1000;
  c.owner.user = "alice";
  c.owner.account = "physics";
  c.owner.workload = "training";
  c.request.gpus = 2;
  c.request.gpu_model = "A100-80G";
  c.request.mem_bytes = uint64_t{64} << 30;
  c.request.nvme = 0;
  c.state = state;
  return c;
}

std::unique_ptr<sqlite::Connection> raw_connection(const std::string& path) {
  auto db = sqlite::Connection::open(path, sqlite::Connection::Mode::kReadWrite, 5000);
  db->pragma("enabling foreign keys", "foreign_keys = ON");
  return db;
}

int64_t query_int(sqlite::Connection& db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    throw std::runtime_error(sql + ": " + db.last_error());
  }
  int64_t v = -1;
  if (sqlite3_step(raw) == SQLITE_ROW) v = sqlite3_column_int64(raw, 0);
  sqlite3_finalize(raw);
  return v;
}

Status exec_raw(sqlite::Connection& db, const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db.handle(), sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::Ok();
  Error e(sqlite::error_code_for(rc), message != nullptr ? message : sqlite3_errstr(rc));
  sqlite3_free(message);
  return e;
}

namespace {

class SqliteRaw final : public RawDatabase {
 public:
  explicit SqliteRaw(const std::string& path) : db_(raw_connection(path)) {}
  Status exec(const std::string& sql) override { return exec_raw(*db_, sql); }
  int64_t query_int(const std::string& sql) override { return testing::query_int(*db_, sql); }

 private:
  std::unique_ptr<sqlite::Connection> db_;
};

class PgRaw final : public RawDatabase {
 public:
  explicit PgRaw(const std::string& conninfo) : db_(PQconnectdb(conninfo.c_str())) {}
  ~PgRaw() override { PQfinish(db_); }
  PgRaw(const PgRaw&) = delete;
  PgRaw& operator=(const PgRaw&) = delete;
  Status exec(const std::string& sql) override {
    PGresult* r = PQexec(db_, sql.c_str());
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      PQclear(r);
      return Status::Ok();
    }
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const bool constraint = state != nullptr && std::string(state).substr(0, 2) == "23";
    Error e(constraint ? ErrorCode::kConflict : ErrorCode::kInternal, PQerrorMessage(db_));
    PQclear(r);
    return e;
  }
  int64_t query_int(const std::string& sql) override {
    PGresult* r = PQexec(db_, sql.c_str());
    int64_t v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
      v = std::stoll(PQgetvalue(r, 0, 0));
    }
    PQclear(r);
    return v;
  }

 private:
  PGconn* db_;
};

// Stops the shared PostgreSQL at the end of the test process.
class PgEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { test_support::PgServer::stop_shared(); }
};
[[maybe_unused]] ::testing::Environment* const kPgEnvironment =
    ::testing::AddGlobalTestEnvironment(new PgEnvironment);

}  // namespace

std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "SQLite" : "PostgreSQL";
}

std::unique_ptr<RawDatabase> StoreTest::raw_database() {
  if (backend() == Backend::kPostgresql) return std::make_unique<PgRaw>(pg_conninfo_);
  return std::make_unique<SqliteRaw>(db_path());
}

std::string StoreTest::unique_refusal(const std::string& table,
                                      const std::vector<std::string>& columns) {
  std::string out;
  for (const auto& c : columns) {
    if (backend() == Backend::kSqlite) {
      out += (out.empty() ? "" : ", ") + table + "." + c;
    } else {
      out += (out.empty() ? "(" : ", ") + c;
    }
  }
  return backend() == Backend::kSqlite ? out : out + ")=";
}

void StoreTest::SetUp() {
  if (backend() == Backend::kPostgresql) {
    std::string why;
    bool installed = true;
    test_support::PgServer* server = test_support::PgServer::shared(why, installed);
    if (!installed) GTEST_SKIP() << why;
    ASSERT_NE(server, nullptr) << why;
    pg_conninfo_ = server->fresh_database();
  }
  reopen();
}

void StoreTest::TearDown() { store_.reset(); }

void StoreTest::reopen(bool durable) {
  store_.reset();
  StoreOptions options;
  options.durable = durable;
  auto opened = backend() == Backend::kPostgresql ? Store::open_postgresql(pg_conninfo_)
                                                  : Store::open(db_path(), options);
  ASSERT_TRUE(opened.ok()) << opened.error();
  store_ = std::move(*opened);
}

void StoreTest::add_inventory() {
  ASSERT_TRUE(
      store().upsert_hosts({make_host("node1"), make_host("node2"), make_host("node3")}).ok());
  std::vector<Device> devices;
  for (int i = 0; i < 6; ++i) {
    devices.push_back(
        make_device("gpu-" + std::to_string(i), DeviceType::kGpu, i < 4 ? "z1" : "z2"));
  }
  devices.push_back(make_device("mem-0", DeviceType::kMem));
  devices.push_back(make_device("mem-1", DeviceType::kMem, "z2"));
  devices.push_back(make_device("nvme-0", DeviceType::kNvme));
  auto s = store().upsert_devices(devices, 0);
  ASSERT_TRUE(s.ok()) << s;
}

int64_t StoreTest::event_count() {
  auto events = store().events({});
  EXPECT_TRUE(events.ok()) << events.error();
  return events.ok() ? static_cast<int64_t>(events->size()) : -1;
}

}  // namespace composer::db::testing
