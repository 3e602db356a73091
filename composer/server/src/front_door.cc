#include "front_door.h"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstring>
#include <list>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/common/work_queue.h"

namespace composer::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
// TCP and the Unix socket alike: one kind of connection for both.
using stream = asio::generic::stream_protocol;
using stream_acceptor = asio::basic_socket_acceptor<stream>;

namespace {

// What a refused connection may still send before composerd closes it: its answer stays
// readable for a client that is still writing its body (a close with unread data resets it).
constexpr size_t kDrainBytes = size_t{4} << 20;
constexpr auto kDrainTime = std::chrono::seconds(2);
// Connections being told "too many connections" at once; beyond, they are closed unanswered.
constexpr size_t kMaxRefusing = 64;

bool known_method(std::string_view m) {
  static constexpr std::string_view kMethods[] = {"GET",     "HEAD",  "POST",  "PUT",    "DELETE",
                                                  "OPTIONS", "PATCH", "TRACE", "CONNECT"};
  return std::find(std::begin(kMethods), std::end(kMethods), m) != std::end(kMethods);
}

// Beast's string_view is Boost's (1.74) or Boost.Core's (1.80 and later): copied as a view.
std::string_view view(beast::string_view v) { return {v.data(), v.size()}; }

// A Range header composerd can read: "bytes=" and ranges of digits. composerd ignores a
// readable one (it answers whole bodies, as HTTP allows) and refuses the rest.
bool readable_range(std::string_view v) {
  const std::string_view unit = "bytes=";
  if (v.substr(0, unit.size()) != unit) return false;
  v.remove_prefix(unit.size());
  for (const std::string& part : split(v, ',')) {
    const std::string_view r = trim(part);
    const auto dash = r.find('-');
    if (dash == std::string::npos || r.size() == 1) return false;
    const bool digits =
        std::all_of(r.begin(), r.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9'); });
    if (!digits || r.find('-', dash + 1) != std::string::npos) return false;
  }
  return true;
}

// The client's address of a TCP connection, as text.
std::string address_of(const stream::endpoint& remote) {
  char text[INET6_ADDRSTRLEN] = {};
  const sockaddr* sa = remote.data();
  const void* addr = nullptr;
  if (sa->sa_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr;
  } else if (sa->sa_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  }
  if (addr == nullptr || ::inet_ntop(sa->sa_family, addr, text, sizeof text) == nullptr) {
    return "unknown";
  }
  return text;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return "";
}

class Connection;

struct FrontDoor::Impl {
  Impl(FrontDoorLimits l, Answer a, Refusal r, Answered d)
      : limits(l), answer(std::move(a)), refusal(std::move(r)), answered(std::move(d)) {}

  FrontDoorLimits limits;
  Answer answer;
  Refusal refusal;
  Answered answered;
  std::atomic<bool> stopping{false};
  // The io thread's alone: every open connection, the idle ones oldest first, counts per peer.
  // Declared before the io context, whose pending handlers may hold the last connections.
  std::unordered_set<Connection*> open;
  std::list<Connection*> idle;
  std::unordered_map<std::string, size_t> per_peer;
  size_t refusing = 0;
  asio::io_context io{1};
  stream_acceptor acceptor{io};
  stream_acceptor local_acceptor{io};  // ListenSocket, when set
  std::string local_path;              // its path, removed again at stop
  // The handlers' threads: requests wait here in arrival order, at most one per connection.
  std::unique_ptr<WorkQueue> workers;

  void accept(stream_acceptor& from, bool local);
  void admit(stream::socket socket, bool local);
  bool shed_idle(const std::string* peer);
  void refuse(stream::socket socket, const std::string& sentence);
  void close_all();
};

// One client connection; lives on the io thread but while a worker handles its request.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(FrontDoor::Impl& door, stream::socket socket, std::string peer,
             std::optional<LocalPeer> local)
      : door_(door), stream_(std::move(socket)), peer_(std::move(peer)), local_(local) {}
  ~Connection() { release(); }

  const std::string& peer() const { return peer_; }

  void start() { wait_request(); }

  // Closes the connection now (shed, or composerd stopping); its pending operation ends.
  void close() {
    release();
    beast::error_code ec;
    stream_.socket().shutdown(stream::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }
  bool busy() const { return busy_; }

 private:
  // Gives the connection's place back: counted once, whichever comes first.
  void release() {
    if (released_) return;
    released_ = true;
    leave_idle();
    door_.open.erase(this);
    if (auto it = door_.per_peer.find(peer_); it != door_.per_peer.end() && --it->second == 0) {
      door_.per_peer.erase(it);
    }
  }
  void enter_idle() {
    if (!in_idle_) idle_pos_ = door_.idle.insert(door_.idle.end(), this);
    in_idle_ = true;
  }
  void leave_idle() {
    if (in_idle_) door_.idle.erase(idle_pos_);
    in_idle_ = false;
  }

  // Idle until the next request's first byte (a pipelined one may be in the buffer already).
  void wait_request() {
    if (door_.stopping.load() || released_) return close();
    if (buffer_.size() > 0) return read_header();
    enter_idle();
    stream_.expires_after(std::chrono::milliseconds(door_.limits.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->leave_idle();
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_header();
                            });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(door_.limits.header_bytes));
    parser_->body_limit(door_.limits.body_bytes);
    stream_.expires_after(std::chrono::milliseconds(door_.limits.request_timeout_ms));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // The request line ends before the most composerd reads: the header block is too large.
  bool request_line_too_long() const {
    const asio::const_buffer data = buffer_.data();
    const std::string_view text(static_cast<const char*>(data.data()),
                                std::min(data.size(), kMaxRequestLine + 2));
    return text.find("\r\n") == std::string_view::npos && data.size() > kMaxRequestLine;
  }

  void on_header(beast::error_code ec) {
    const auto& limits = door_.limits;
    if (ec == http::error::header_limit) {
      if (request_line_too_long()) return refuse(414, line_sentence());
      return refuse(431, "request header block larger than " + std::to_string(limits.header_bytes) +
                             " bytes, the most composerd reads (ApiMaxHeaderBytes)");
    }
    if (ec == http::error::body_limit) return refuse(413, body_sentence());
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::eof ||
        ec == asio::error::connection_reset) {
      return close();
    }
    if (ec) return refuse(400, malformed());
    const auto& req = parser_->get();
    const std::string method(req.method_string());
    if (!known_method(method) || (req.version() != 10 && req.version() != 11)) {
      return refuse(400, malformed());
    }
    if (req.target().size() > kMaxRequestLine) return refuse(414, line_sentence());
    const size_t fields = static_cast<size_t>(std::distance(req.begin(), req.end()));
    if (fields > limits.header_fields) {
      return refuse(431, "request has " + std::to_string(fields) + " header fields, more than " +
                             std::to_string(limits.header_fields) +
                             ", the most composerd reads (ApiMaxHeaders)");
    }
    if (auto it = req.find(http::field::content_encoding); it != req.end()) {
      const std::string coding = lower(trim(view(it->value())));
      if (coding != "identity") {
        return refuse(415, "Content-Encoding: " + printable(view(it->value())) +
                               " is not accepted: composerd reads request bodies as sent and "
                               "never decompresses them; send the body uncompressed");
      }
    }
    if (auto it = req.find(http::field::transfer_encoding); it != req.end()) {
      if (lower(trim(view(it->value()))) != "chunked") {
        return refuse(400, "Transfer-Encoding: " + printable(view(it->value())) +
                               " is not accepted: composerd reads bodies sent with "
                               "Content-Length or chunked, never compressed");
      }
    }
    if (auto it = req.find(http::field::range); it != req.end()) {
      if (!readable_range(view(it->value()))) {
        return refuse(416,
                      "unreadable Range header; composerd answers whole bodies only (send no "
                      "Range)");
      }
    }
    if (parser_->is_done()) return handle();
    if (auto it = req.find(http::field::expect); it != req.end()) {
      if (lower(view(it->value())) != "100-continue") {
        return refuse(417, "Expect: " + printable(view(it->value())) +
                               " is not understood; composerd knows only 100-continue");
      }
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      return asio::async_write(stream_, asio::buffer(*cont),
                               [self = shared_from_this(), cont](beast::error_code e, size_t) {
                                 if (e) return self->close();
                                 self->read_body();
                               });
    }
    read_body();
  }

  void read_body() {
    http::async_read(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec == http::error::body_limit) {
            return self->refuse(413, self->body_sentence());
          }
          if (ec == asio::error::operation_aborted) return self->close();  // stopping
          if (ec == http::error::end_of_stream || ec == asio::error::eof ||
              ec == http::error::partial_message) {
            // The client closed its side before the whole body came: told, if it still
            // reads, and logged (composerd_front_door_test, ABodyCutShortIsAnsweredAndLogged).
            return self->refuse(400, self->cut_short("the client closed its side"),
                                "api request body cut short");
          }
          if (ec == beast::error::timeout || ec == asio::error::connection_reset) {
            log::warning("api request body cut short",
                         {{"peer", self->peer_},
                          {"cause", self->cut_short(ec == beast::error::timeout
                                                        ? "no more came within ApiRequestTimeout"
                                                        : "the client reset the connection")}});
            return self->close();
          }
          if (ec) return self->refuse(400, self->malformed());
          self->handle();
        });
  }

  // "request body ended after 10 of 100 bytes: WHY" (the total when the header gave one).
  std::string cut_short(const std::string& why) const {
    const auto& req = parser_->get();
    const auto expected = parser_->content_length();  // none for a chunked body
    return "request body ended after " + std::to_string(req.body().size()) +
           (expected ? " of " + std::to_string(*expected) : std::string()) + " bytes: " + why;
  }
  std::string body_sentence() const {
    return "request body larger than " + std::to_string(door_.limits.body_bytes) +
           " bytes, the most composerd reads";
  }
  static std::string line_sentence() {
    return "request line longer than " + std::to_string(kMaxRequestLine) +
           " bytes, the most composerd reads";
  }
  static std::string malformed() {
    return "malformed HTTP request: expected an HTTP/1.1 request line and headers";
  }

  // A complete request: to a worker; the io thread goes on with the others.
  void handle() {
    stream_.expires_never();
    busy_ = true;
    auto msg = parser_->release();
    parser_.reset();
    auto req = std::make_shared<HttpRequest>();
    req->method = std::string(msg.method_string());
    req->target = std::string(msg.target());
    const auto q = req->target.find('?');
    req->path = percent_decode(std::string_view(req->target).substr(0, q), false);
    if (q != std::string::npos) req->query = req->target.substr(q + 1);
    for (const auto& f : msg) {
      req->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    req->body = std::move(msg.body());
    req->peer = peer_;
    req->local = local_;
    const bool keep = msg.keep_alive();
    const auto executor = stream_.get_executor();
    // Counted as the io loop's work until the answer is posted back: run() waits for it.
    auto work = asio::make_work_guard(door_.io);
    door_.workers->post([self = shared_from_this(), req, keep, executor, &door = door_,
                         work = std::move(work)]() mutable {
      // HEAD keeps its name: its credential names HEAD (the router answers it as GET).
      const bool head = req->method == "HEAD";
      // The reply holds the connection, the request and the io loop's work until it is sent.
      auto held = std::make_shared<decltype(work)>(std::move(work));
      auto sent = std::make_shared<std::atomic<bool>>(false);
      HttpReply reply = [self, req, keep, executor, &door, head, held,
                         sent](HttpResponse res) mutable {
        if (sent->exchange(true)) return;
        door.answered(*req, res);
        asio::post(executor, [self, res = std::move(res), keep, head]() mutable {
          self->write(std::move(res), keep && !self->door_.stopping.load(), head);
        });
      };
      try {
        door.answer(*req, reply);
      } catch (const std::exception& e) {
        reply(door.refusal(500, std::string("internal error: ") + e.what()));
      }
    });
  }

  void write(HttpResponse res, bool keep, bool head) {
    busy_ = false;
    if (released_) return;  // shed or stopped while the worker ran
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->version(11);
    msg->result(static_cast<unsigned>(res.status));
    msg->set(http::field::content_type, res.content_type);
    msg->keep_alive(keep);
    msg->content_length(res.body.size());
    if (!head) msg->body() = std::move(res.body);
    stream_.expires_after(std::chrono::milliseconds(door_.limits.request_timeout_ms));
    http::async_write(stream_, *msg,
                      [self = shared_from_this(), msg, keep](beast::error_code ec, size_t) {
                        if (ec) return self->close();
                        if (!keep) return self->linger();
                        self->wait_request();
                      });
  }

  // What the HTTP layer refuses: answered, then the connection is closed. Logged at debug,
  // or at warning under the title `warn` when given.
  void refuse(int status, const std::string& sentence, const char* warn = nullptr) {
    parser_.reset();
    HttpResponse res = door_.refusal(status, sentence);
    HttpRequest none;
    door_.answered(none, res);
    log::write(warn != nullptr ? log::Level::kWarning : log::Level::kDebug,
               warn != nullptr ? warn : "api refused",
               {{"peer", peer_}, {"status", std::to_string(status)}, {"cause", sentence}});
    write(std::move(res), false, false);
  }

  // Half-closes, reads and drops what the client still sends (bounded), then closes.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(stream::socket::shutdown_send, ec);
    if (ec) return close();
    buffer_.clear();
    stream_.expires_after(kDrainTime);
    drain();
  }
  void drain() {
    stream_.async_read_some(buffer_.prepare(65536),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kDrainBytes) return self->close();
                              self->drain();
                            });
  }

  FrontDoor::Impl& door_;
  beast::basic_stream<stream> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string peer_;
  std::optional<LocalPeer> local_;
  std::list<Connection*>::iterator idle_pos_;
  bool in_idle_ = false;
  bool busy_ = false;
  bool released_ = false;
  size_t drained_ = 0;
};

// Closes the oldest idle connection (of `peer`, when given); false when there is none.
bool FrontDoor::Impl::shed_idle(const std::string* peer) {
  for (Connection* c : idle) {
    if (peer != nullptr && c->peer() != *peer) continue;
    log::debug("api connection shed", {{"peer", c->peer()}, {"cause", "oldest idle"}});
    c->close();
    return true;
  }
  return false;
}

void FrontDoor::Impl::refuse(stream::socket socket, const std::string& sentence) {
  log::warning("api connection refused", {{"cause", sentence}});
  if (refusing >= kMaxRefusing) return;  // the socket closes as it goes
  ++refusing;
  const HttpResponse res = refusal(503, sentence);
  auto text = std::make_shared<std::string>(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + res.content_type +
      "\r\nContent-Length: " + std::to_string(res.body.size()) + "\r\nConnection: close\r\n\r\n" +
      res.body);
  auto sock = std::make_shared<beast::basic_stream<stream>>(std::move(socket));
  sock->expires_after(std::chrono::seconds(1));
  sock->async_write_some(asio::buffer(*text), [this, sock, text](beast::error_code, size_t) {
    --refusing;
    beast::error_code ec;
    sock->socket().shutdown(stream::socket::shutdown_both, ec);
  });
}

void FrontDoor::Impl::admit(stream::socket socket, bool local) {
  beast::error_code ec;
  std::string peer;
  std::optional<LocalPeer> who;
  if (local) {
    // The kernel's word for who connected: the uid every request on it runs as.
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
    who = LocalPeer{.uid = cred.uid, .gid = cred.gid};
    peer = "local uid " + std::to_string(cred.uid);
  } else {
    const auto remote = socket.remote_endpoint(ec);
    if (ec) return;
    socket.set_option(tcp::no_delay(true), ec);  // header and body go out at once
    peer = address_of(remote);
  }
  if (open.size() >= limits.max_connections && !shed_idle(nullptr)) {
    return refuse(std::move(socket), "too many connections: " + std::to_string(open.size()) +
                                         " open and none idle (ApiMaxConnections=" +
                                         std::to_string(limits.max_connections) + ")");
  }
  if (per_peer[peer] >= limits.max_connections_per_peer && !shed_idle(&peer)) {
    return refuse(std::move(socket), "too many connections from " + peer + ": " +
                                         std::to_string(per_peer[peer]) +
                                         " open and none idle (ApiMaxConnectionsPerPeer=" +
                                         std::to_string(limits.max_connections_per_peer) + ")");
  }
  auto conn = std::make_shared<Connection>(*this, std::move(socket), peer, who);
  open.insert(conn.get());
  ++per_peer[peer];
  conn->start();
}

void FrontDoor::Impl::accept(stream_acceptor& from, bool local) {
  from.async_accept([this, &from, local](beast::error_code ec, stream::socket socket) {
    if (stopping.load() || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or memory: free the oldest idle connection and
      // try again shortly; the kernel's backlog holds the waiting clients meanwhile.
      log::warning("api cannot accept a connection", {{"cause", ec.message()}});
      shed_idle(nullptr);
      auto again = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
      again->async_wait([this, again, &from, local](beast::error_code e) {
        if (!e && !stopping.load()) accept(from, local);
      });
      return;
    }
    admit(std::move(socket), local);
    accept(from, local);
  });
}

void FrontDoor::Impl::close_all() {
  beast::error_code ec;
  acceptor.close(ec);
  local_acceptor.close(ec);
  struct stat st {};
  if (!local_path.empty() && ::lstat(local_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    ::unlink(local_path.c_str());
  }
  std::vector<Connection*> now(open.begin(), open.end());
  for (Connection* c : now) {
    if (!c->busy()) c->close();  // a busy one closes after its answer
  }
}

FrontDoor::FrontDoor(FrontDoorLimits limits, Answer answer, Refusal refusal, Answered answered)
    : impl_(std::make_unique<Impl>(limits, std::move(answer), std::move(refusal),
                                   std::move(answered))) {}

FrontDoor::~FrontDoor() {
  stop();
  impl_->io.restart();
  impl_->io.run();  // what closing left pending, then the connections are gone
}

Status FrontDoor::bind(const std::string& address, int port) {
  auto& in = *impl_;
  auto fail = [&](const beast::error_code& ec) {
    return Error{ErrorCode::kUnavailable,
                 "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message()};
  };
  beast::error_code ec;
  tcp::resolver resolver(in.io);
  auto found = resolver.resolve(address, std::to_string(port),
                                tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) return fail(ec);
  for (const auto& entry : found) {
    const stream::endpoint at(entry.endpoint());
    in.acceptor.open(at.protocol(), ec);
    if (ec) continue;
    in.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    in.acceptor.bind(at, ec);
    if (!ec) in.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) break;
    beast::error_code ignored;
    in.acceptor.close(ignored);
  }
  if (ec) return fail(ec);
  // Room for every connection allowed, beside the database's and the fabric's descriptors.
  rlimit nofile{};
  const rlim_t want = static_cast<rlim_t>(in.limits.max_connections + 256);
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < want) {
    nofile.rlim_cur = std::min(want, nofile.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur < want) {
      log::warning("fewer file descriptors than ApiMaxConnections needs",
                   {{"limit", std::to_string(nofile.rlim_cur)}, {"wanted", std::to_string(want)}});
    }
  }
  return Status::Ok();
}

Status FrontDoor::bind_local(const std::string& path) {
  auto& in = *impl_;
  auto fail = [&](const std::string& why) {
    return Error{ErrorCode::kUnavailable, "cannot listen on " + path + ": " + why};
  };
  if (path.empty() || path.front() != '/' || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return fail("a Unix socket path is absolute and shorter than " +
                std::to_string(sizeof(sockaddr_un::sun_path)) + " characters");
  }
  // A socket left by an earlier composerd is replaced; anything else at the path is not.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail("the path exists and is not a socket");
    if (::unlink(path.c_str()) != 0) return fail(std::strerror(errno));
  }
  beast::error_code ec;
  const stream::endpoint at{asio::local::stream_protocol::endpoint(path)};
  in.local_acceptor.open(at.protocol(), ec);
  if (!ec) in.local_acceptor.bind(at, ec);
  // Anyone on the host may connect: the uid the kernel reports decides what they may do.
  if (!ec && ::chmod(path.c_str(), 0666) != 0) ec.assign(errno, beast::system_category());
  if (!ec) in.local_acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    in.local_acceptor.close(ignored);
    return fail(ec.message());
  }
  in.local_path = path;
  return Status::Ok();
}

int FrontDoor::port() const {
  beast::error_code ec;
  const stream::endpoint at = impl_->acceptor.local_endpoint(ec);
  if (ec) return 0;
  if (at.data()->sa_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(at.data())->sin_port);
  }
  if (at.data()->sa_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(at.data())->sin6_port);
  }
  return 0;
}

void FrontDoor::run() {
  auto& in = *impl_;
  if (in.stopping.load()) return;
  in.workers = std::make_unique<WorkQueue>(in.limits.workers, "api-worker");
  in.accept(in.acceptor, false);
  if (in.local_acceptor.is_open()) in.accept(in.local_acceptor, true);
  in.io.run();
  in.workers.reset();  // every answer was written: the io loop ran out of work
}

void FrontDoor::stop() {
  auto& in = *impl_;
  if (in.stopping.exchange(true)) return;
  asio::post(in.io, [&in] { in.close_all(); });
}

}  // namespace composer::server
