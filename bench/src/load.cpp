// The load drivers of harness-bench: connections prompt their sessions (closed
// or open loop) and verify every turn as it arrives, each on one io_context
// thread with that thread's own counters (no locks); plus the idle-memory modes.
#include "load.hpp"

#include "frame_scan.hpp"
#include "proc_stats.hpp"
#include "subscribers.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <future>
#include <iostream>
#include <thread>

namespace bench {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_messages = 20;

/// Counts down from n; the last count_down() fulfils the future.
class Latch {
 public:
  explicit Latch(int n) : left_(n) {
    if (n <= 0) done_.set_value();
  }
  void count_down() {
    if (left_.fetch_sub(1) == 1) done_.set_value();
  }
  bool wait_for(Clock::duration d) { return future_.wait_for(d) == std::future_status::ready; }

 private:
  std::atomic<int> left_;
  std::promise<void> done_;
  std::future<void> future_ = done_.get_future();
};

/// One per io_context thread; merged after the threads stop.
struct ThreadStats {
  std::uint64_t prompts = 0, notifications = 0, bytes = 0;  // in the window
  std::uint64_t prompts_sent = 0, prompts_answered = 0, notifications_total = 0, bytes_total = 0;
  std::uint64_t frames = 0, slow_frames = 0, errors = 0, failures = 0;
  Histogram first;
  Histogram response;
  std::vector<std::string> messages;

  void note(std::string message) {
    if (messages.size() < max_messages) messages.push_back(std::move(message));
  }
};

enum class Plan { none, closed, open, once };

/// Read by every connection, written only before the threads see it.
struct Shared {
  const Options& opt;
  std::string run_id;
  std::string prompt_json;  ///< the prompt text, already JSON-escaped
  int expected_deltas = 0;
  int sessions = 0;  ///< per connection
  Plan plan = Plan::none;
  Clock::time_point t_start{}, t_warm{}, t_end{Clock::time_point::max()};
  Clock::duration period{};  ///< open loop: between two prompts of one session
  double rate = 0;
  int once_window = 64;
  Latch* done = nullptr;
};

std::uint64_t ns(Clock::duration d) {
  auto v = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return v < 0 ? 0 : static_cast<std::uint64_t>(v);
}

std::string head(std::string_view text) {
  return std::string(text.substr(0, 160)) + (text.size() > 160 ? "…" : "");
}

class Connection final : public FrameHandler {
 public:
  Connection(Shared& shared, ThreadStats& stats, asio::any_io_executor ex, int index)
      : shared_(shared), stats_(stats), ex_(ex), index_(index) {
    const Target& t = shared.opt.target;
    std::size_t buffer = shared.opt.read_buffer;
    if (t.kind == Target::Kind::ws) {
      transport_ = make_ws_transport(ex, t);
    } else if (t.kind == Target::Kind::tcp) {
      transport_ = make_tcp_transport(ex, t, buffer);
    } else {
      transport_ = make_stdio_transport(ex, t, buffer);
    }
    sessions_.resize(static_cast<std::size_t>(shared.sessions));
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
      sessions_[i].id = fmt::format("{}-{}-{}", shared.run_id, index, i);
    }
  }

  asio::any_io_executor executor() const { return ex_; }
  pid_t child_pid() const { return transport_->child_pid(); }
  int reap(std::chrono::milliseconds timeout) { return transport_->reap(timeout); }
  bool initialized() const { return initialized_; }

  void begin_setup(Latch* latch) {
    setup_latch_ = latch;
    asio::co_spawn(ex_, setup(), asio::detached);
  }

  void start(Plan plan) {
    plan_ = plan;
    if (closed_ || !initialized_) {
      mark_done();
      return;
    }
    const Clock::time_point now = Clock::now();
    switch (plan) {
      case Plan::none:
        break;
      case Plan::closed:
        for (Session& s : sessions_) send_prompt(s, now);
        break;
      case Plan::open:
        for (std::size_t i = 0; i < sessions_.size(); ++i) {
          Session& s = sessions_[i];
          const double global = static_cast<double>(static_cast<std::size_t>(index_) * sessions_.size() + i);
          s.next_due = shared_.t_start + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(global / shared_.rate));
          s.timer = std::make_unique<asio::steady_timer>(ex_);
          arm(i);
        }
        break;
      case Plan::once:
        for (int i = 0; i < shared_.once_window && next_once_ < sessions_.size(); ++i) {
          send_prompt(sessions_[next_once_++], now);
        }
        break;
    }
    transport_->flush();
    check_done();
  }

  void close() {
    closed_ = true;
    for (Session& s : sessions_) {
      if (s.timer) s.timer->cancel();
    }
    transport_->close();
  }

  /// After the threads stopped: turns still unanswered are errors.
  void finalize() {
    if (!initialized_ && !setup_failed_) {
      ++stats_.errors;
      stats_.note(fmt::format("connection {}: no answer to initialize", index_));
    }
    if (in_flight_ > 0) {
      stats_.errors += static_cast<std::uint64_t>(in_flight_);
      stats_.note(fmt::format("connection {}: {} prompt(s) unanswered at the end", index_, in_flight_));
      in_flight_ = 0;
    }
  }

  // FrameHandler
  void on_read(std::size_t bytes, Clock::time_point now) override {
    stats_.bytes_total += bytes;
    if (in_window(now)) stats_.bytes += bytes;
  }

  void on_frame(std::string_view text, Clock::time_point now) override {
    Frame f = scanner_.scan(text);
    ++stats_.frames;
    if (f.slow) ++stats_.slow_frames;
    switch (f.kind) {
      case Frame::Kind::event:
        on_event(f, now);
        break;
      case Frame::Kind::response:
      case Frame::Kind::error:
        on_response(f, now, text);
        break;
      case Frame::Kind::notification:
        count_notification(now);
        break;
      case Frame::Kind::request:
        failure("server sent a request: " + head(text));
        break;
      case Frame::Kind::invalid:
        failure("invalid frame: " + head(text));
        break;
    }
  }

  void on_read_done() override { transport_->flush(); }

  void on_closed(const std::string& why) override {
    if (closed_) return;
    closed_ = true;
    setup_failed_ = !initialized_;
    ++stats_.errors;
    stats_.note(fmt::format("connection {}: {}", index_, why));
    if (in_flight_ > 0) {
      stats_.errors += static_cast<std::uint64_t>(in_flight_);
      stats_.note(fmt::format("connection {}: {} prompt(s) unanswered when it closed", index_, in_flight_));
      in_flight_ = 0;
    }
    for (Session& s : sessions_) {
      s.in_flight = false;
      if (s.timer) s.timer->cancel();
    }
    report_setup();
    mark_done();
  }

 private:
  struct Session {
    std::string id;
    std::int64_t next_seq = 0;  ///< fresh ids: seq starts at 0
    std::int64_t turns = 0;
    std::int64_t req_id = -1;
    bool in_flight = false;
    bool finished = false;
    bool got_first = false;
    bool saw_end = false;
    bool failed = false;
    int deltas = 0;
    Clock::time_point sent{};  ///< actual send time (closed loop) or scheduled time (open loop)
    Clock::time_point first_at{};
    Clock::time_point next_due{};
    std::unique_ptr<asio::steady_timer> timer;
  };

  asio::awaitable<void> setup() {
    std::string error;
    try {
      co_await transport_->open();
    } catch (const boost::system::system_error& e) {
      error = e.code().message();
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) {
      fail_setup("connect failed: " + error);
      co_return;
    }
    transport_->start_reading(*this);
    std::string init =
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"harness-bench","version":"1"}}})";
    transport_->send(init);
    transport_->flush();
  }

  bool in_window(Clock::time_point now) const { return now >= shared_.t_warm && now < shared_.t_end; }

  void count_notification(Clock::time_point now) {
    ++stats_.notifications_total;
    if (in_window(now)) ++stats_.notifications;
  }

  void failure(std::string why) {
    ++stats_.failures;
    stats_.note(fmt::format("connection {}: {}", index_, why));
  }

  void fail_turn(Session& s, std::string_view why) {
    if (s.failed) return;  // one failure per turn
    s.failed = true;
    ++stats_.failures;
    stats_.note(fmt::format("{} turn {}: {}", s.id, s.turns - 1, why));
  }

  void fail_setup(const std::string& why) {
    setup_failed_ = true;
    ++stats_.errors;
    stats_.note(fmt::format("connection {}: {}", index_, why));
    closed_ = true;
    transport_->close();
    report_setup();
    mark_done();
  }

  void report_setup() {
    if (setup_latch_ != nullptr) {
      Latch* latch = setup_latch_;
      setup_latch_ = nullptr;
      latch->count_down();
    }
  }

  void mark_done() {
    if (done_reported_ || shared_.done == nullptr || plan_ == Plan::none) return;
    done_reported_ = true;
    shared_.done->count_down();
  }

  void check_done() {
    if (finished_ == sessions_.size() && in_flight_ == 0) mark_done();
  }

  Session* find_session(std::string_view id) {
    std::size_t dash = id.rfind('-');
    if (dash == std::string_view::npos) return nullptr;
    std::size_t i = 0;
    auto [ptr, ec] = std::from_chars(id.data() + dash + 1, id.data() + id.size(), i);
    if (ec != std::errc() || ptr != id.data() + id.size() || i >= sessions_.size()) return nullptr;
    if (sessions_[i].id != id) return nullptr;
    return &sessions_[i];
  }

  void send_prompt(Session& s, Clock::time_point sent) {
    s.req_id = 1 + s.turns * static_cast<std::int64_t>(sessions_.size()) + (&s - sessions_.data());
    ++s.turns;
    s.in_flight = true;
    s.got_first = s.saw_end = s.failed = false;
    s.deltas = 0;
    s.sent = sent;
    ++in_flight_;
    ++stats_.prompts_sent;
    frame_.clear();
    fmt::format_to(std::back_inserter(frame_),
                   R"({{"jsonrpc":"2.0","id":{},"method":"session/prompt","params":{{"sessionId":"{}","contentBlocks":[{{"type":"text","text":"{}"}}]}}}})",
                   s.req_id, s.id, shared_.prompt_json);
    transport_->send(frame_);
  }

  void finish(Session& s) {
    if (s.finished) return;
    s.finished = true;
    ++finished_;
    check_done();
  }

  void arm(std::size_t i) {
    Session& s = sessions_[i];
    if (s.next_due >= shared_.t_end) {
      finish(s);
      return;
    }
    s.timer->expires_at(s.next_due);
    s.timer->async_wait([this, i](boost::system::error_code ec) {
      if (!ec) on_due(i);
    });
  }

  void on_due(std::size_t i) {
    if (closed_) return;
    Session& s = sessions_[i];
    send_prompt(s, s.next_due);
    s.next_due += shared_.period;
    transport_->flush();
  }

  void next(Session& s, Clock::time_point now) {
    if (closed_) return;
    switch (plan_) {
      case Plan::none:
        break;
      case Plan::closed:
        if (now < shared_.t_end) {
          send_prompt(s, now);
        } else {
          finish(s);
        }
        break;
      case Plan::open:
        if (s.next_due >= shared_.t_end) {
          finish(s);
        } else if (s.next_due <= now) {  // behind schedule: send now, measured from the schedule
          send_prompt(s, s.next_due);
          s.next_due += shared_.period;
        } else {
          arm(static_cast<std::size_t>(&s - sessions_.data()));
        }
        break;
      case Plan::once:
        finish(s);
        if (next_once_ < sessions_.size()) send_prompt(sessions_[next_once_++], now);
        break;
    }
  }

  void on_event(const Frame& f, Clock::time_point now) {
    count_notification(now);
    Session* s = find_session(f.session_id);
    if (s == nullptr) {
      failure(fmt::format("event for a session this connection did not prompt: {}", f.session_id));
      return;
    }
    if (!s->in_flight) {
      failure(fmt::format("{}: {} (seq {}) arrived outside a turn (after its response)", s->id, f.type, f.seq));
      return;
    }
    if (!s->got_first) {
      s->got_first = true;
      s->first_at = now;
      if (f.type != "turn/start") fail_turn(*s, fmt::format("first event is {}, not turn/start", f.type));
    } else if (s->saw_end) {
      fail_turn(*s, fmt::format("{} after turn/end", f.type));
    }
    if (f.seq != s->next_seq) fail_turn(*s, fmt::format("seq {} where {} was expected", f.seq, s->next_seq));
    s->next_seq = f.seq + 1;
    if (f.type == "turn/end") {
      s->saw_end = true;
    } else if (f.chunk_type == "text-delta") {
      ++s->deltas;
    }
  }

  void on_response(const Frame& f, Clock::time_point now, std::string_view text) {
    if (!f.has_id) {
      ++stats_.errors;
      stats_.note(fmt::format("connection {}: {}", index_, head(text)));
      return;
    }
    if (f.id == 0) {
      if (initialized_) {
        failure("a second response for initialize");
      } else if (f.kind == Frame::Kind::error) {
        fail_setup("initialize failed: " + std::string(f.message));
      } else {
        initialized_ = true;
        report_setup();
      }
      return;
    }
    const auto m = static_cast<std::int64_t>(sessions_.size());
    Session* s = f.id >= 1 && m > 0 ? &sessions_[static_cast<std::size_t>((f.id - 1) % m)] : nullptr;
    if (s == nullptr || !s->in_flight || s->req_id != f.id) {
      failure(fmt::format("response for an id not in flight: {}", head(text)));
      return;
    }
    bool ok = true;
    if (f.kind == Frame::Kind::error) {
      ++stats_.errors;
      stats_.note(fmt::format("{}: error response {}", s->id, f.message));
      ok = false;
    } else {
      if (f.status != "ok") fail_turn(*s, fmt::format("status \"{}\"", f.status));
      if (!s->saw_end) fail_turn(*s, s->got_first ? "response before turn/end" : "response without any event");
      if (s->deltas != shared_.expected_deltas) {
        fail_turn(*s, fmt::format("{} text-delta chunks, expected {}", s->deltas, shared_.expected_deltas));
      }
      ok = !s->failed;
    }
    s->in_flight = false;
    --in_flight_;
    ++stats_.prompts_answered;
    if (ok) {
      if (in_window(now)) ++stats_.prompts;
      if (s->sent >= shared_.t_warm) {
        stats_.response.record(ns(now - s->sent));
        stats_.first.record(ns(s->first_at - s->sent));
      }
    }
    next(*s, now);
  }

  Shared& shared_;
  ThreadStats& stats_;
  asio::any_io_executor ex_;
  int index_;
  std::unique_ptr<ClientTransport> transport_;
  FrameScanner scanner_;
  std::vector<Session> sessions_;
  std::string frame_;
  Plan plan_ = Plan::none;
  Latch* setup_latch_ = nullptr;
  bool initialized_ = false;
  bool setup_failed_ = false;  ///< already counted as an error
  bool closed_ = false;
  bool done_reported_ = false;
  int in_flight_ = 0;
  std::size_t finished_ = 0;
  std::size_t next_once_ = 0;
};

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}

/// Threads, connections and their counters for one run.
class Runner {
 public:
  Runner(const Options& opt, int connections, int sessions, std::string_view prompt, int expected_deltas)
      : shared_{opt} {
    shared_.run_id = fmt::format("hb{}x{}", getpid(),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                         .count() %
                                     100000000);
    shared_.prompt_json = json_escape(prompt);
    shared_.expected_deltas = expected_deltas;
    shared_.sessions = sessions;
    const int threads = std::max(1, opt.threads);
    stats_.resize(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      ios_.push_back(std::make_unique<asio::io_context>(1));
      guards_.emplace_back(ios_.back()->get_executor());
    }
    for (int c = 0; c < connections; ++c) {
      const auto t = static_cast<std::size_t>(c % threads);
      conns_.push_back(std::make_unique<Connection>(shared_, stats_[t], ios_[t]->get_executor(), c));
    }
    for (auto& io : ios_) {
      asio::io_context* ctx = io.get();
      threads_.emplace_back([ctx] { ctx->run(); });
    }
  }

  ~Runner() { stop(); }

  Shared& shared() { return shared_; }

  /// Connects and initializes every connection, `wave` at a time. False
  /// when a wave did not finish in time.
  bool setup(int wave, Clock::duration timeout) {
    const bool verbose = shared_.opt.verbose;
    for (std::size_t first = 0; first < conns_.size(); first += static_cast<std::size_t>(wave)) {
      const std::size_t last = std::min(conns_.size(), first + static_cast<std::size_t>(wave));
      latches_.push_back(std::make_unique<Latch>(static_cast<int>(last - first)));
      Latch* latch = latches_.back().get();
      for (std::size_t i = first; i < last; ++i) {
        Connection* c = conns_[i].get();
        asio::post(c->executor(), [c, latch] { c->begin_setup(latch); });
      }
      if (!latch->wait_for(timeout)) return false;
      if (verbose && conns_.size() > 100) std::cerr << "harness-bench: " << last << " connections set up\n";
    }
    return true;
  }

  std::size_t initialized() const {
    std::size_t n = 0;
    for (const auto& c : conns_) n += c->initialized() ? 1 : 0;  // threads quiet between phases
    return n;
  }

  std::vector<pid_t> server_pids() const {
    std::vector<pid_t> pids = shared_.opt.server_pids;
    for (const auto& c : conns_) {
      if (c->child_pid() > 0) pids.push_back(c->child_pid());
    }
    return pids;
  }

  /// Starts `plan` everywhere; returns the latch that opens when all are done.
  Latch& start(Plan plan) {
    shared_.plan = plan;
    latches_.push_back(std::make_unique<Latch>(static_cast<int>(conns_.size())));
    shared_.done = latches_.back().get();
    for (auto& conn : conns_) {
      Connection* c = conn.get();
      asio::post(c->executor(), [c, plan] { c->start(plan); });
    }
    return *shared_.done;
  }

  /// Closes every connection, reaps spawned servers, stops the threads.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    for (auto& conn : conns_) {
      Connection* c = conn.get();
      asio::post(c->executor(), [c] { c->close(); });
    }
    for (auto& conn : conns_) {
      int status = conn->reap(5s);
      if (status != -1 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        child_failures_.push_back(WIFEXITED(status) ? fmt::format("server exited with code {}", WEXITSTATUS(status))
                                                    : fmt::format("server killed by signal {}", WTERMSIG(status)));
      }
    }
    for (auto& g : guards_) g.reset();
    for (auto& t : threads_) t.join();
    for (auto& conn : conns_) conn->finalize();
  }

  /// Merges every thread's counters into r (call after stop()).
  void collect(Results& r) {
    Histogram first;
    Histogram response;
    for (ThreadStats& s : stats_) {
      r.prompts += s.prompts;
      r.notifications += s.notifications;
      r.bytes += s.bytes;
      r.prompts_sent += s.prompts_sent;
      r.prompts_answered += s.prompts_answered;
      r.notifications_total += s.notifications_total;
      r.bytes_total += s.bytes_total;
      r.frames_total += s.frames;
      r.slow_frames += s.slow_frames;
      r.errors += s.errors;
      r.failures += s.failures;
      for (std::string& m : s.messages) {
        if (r.messages.size() < max_messages) r.messages.push_back(std::move(m));
      }
      first.merge(s.first);
      response.merge(s.response);
    }
    for (const std::string& m : child_failures_) {
      ++r.errors;
      if (r.messages.size() < max_messages) r.messages.push_back(m);
    }
    r.first_notification = summarize(first);
    r.response = summarize(response);
  }

 private:
  Shared shared_;
  std::vector<ThreadStats> stats_;
  std::vector<std::unique_ptr<asio::io_context>> ios_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<std::thread> threads_;
  std::deque<std::unique_ptr<Latch>> latches_;
  std::vector<std::string> child_failures_;
  bool stopped_ = false;
};

constexpr int setup_wave = 256;
constexpr auto setup_timeout = 30s;

std::size_t default_read_buffer(int connections) {
  if (connections <= 16) return 256 * 1024;
  if (connections <= 2000) return 64 * 1024;
  return 4 * 1024;
}

void note_setup_failure(Results& r, std::size_t initialized, int wanted) {
  if (initialized < static_cast<std::size_t>(wanted)) {  // each one is counted as an error by its connection
    r.messages.push_back(fmt::format("only {} of {} connections initialized", initialized, wanted));
  }
}

void sample_metrics(const Options& opt, std::optional<MetricsSample>& out, Results& r) {
  if (opt.metrics_url.empty()) return;
  std::string error;
  out = fetch_metrics(opt.metrics_url, error);
  if (!out && r.metrics_error.empty()) r.metrics_error = error;
}

}  // namespace

LatencySummary summarize(const Histogram& h) {
  LatencySummary s;
  s.count = h.count();
  auto us = [](std::uint64_t v) { return static_cast<double>(v) / 1000.0; };
  s.p50_us = us(h.quantile(0.50));
  s.p90_us = us(h.quantile(0.90));
  s.p99_us = us(h.quantile(0.99));
  s.p999_us = us(h.quantile(0.999));
  s.max_us = us(h.max());
  s.mean_us = h.mean() / 1000.0;
  return s;
}

Results run_load(const Options& given) {
  Options opt = given;
  if (opt.read_buffer == 0) opt.read_buffer = default_read_buffer(opt.connections);
  Results r;
  r.mode = "load";
  std::string prompt = fmt::format("@chunks {} {}", opt.chunks, opt.bytes);
  if (opt.delay_ms > 0) prompt += fmt::format("\n@delay {}", opt.delay_ms);
  Runner runner(opt, opt.connections, opt.sessions, prompt, opt.chunks);
  if (!runner.setup(setup_wave, setup_timeout)) r.messages.push_back("connection setup timed out");
  note_setup_failure(r, runner.initialized(), opt.connections);
  const std::vector<pid_t> pids = runner.server_pids();

  std::optional<MetricsSample> m_before;
  std::optional<MetricsSample> m_after;
  sample_metrics(opt, m_before, r);
  const ProcSample before = sample_processes(pids);

  Shared& shared = runner.shared();
  shared.t_start = Clock::now();
  shared.t_warm = shared.t_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.warmup));
  shared.t_end = shared.t_warm + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.duration));
  shared.rate = opt.rate;
  if (opt.rate > 0) {
    const double sessions = static_cast<double>(opt.connections) * opt.sessions;
    shared.period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sessions / opt.rate));
  }
  Latch& done = runner.start(opt.rate > 0 ? Plan::open : Plan::closed);
  std::optional<SubscriberGroup> subscribers;
  if (opt.subscribers > 0) subscribers.emplace(opt, fmt::format("{}-0-0", shared.run_id));

  std::this_thread::sleep_until(shared.t_warm);
  if (subscribers) subscribers->begin_window();
  const ProcSample warm = sample_processes(pids);
  const double client_warm = self_cpu_seconds();
  const double machine_warm = machine_busy_seconds();
  std::this_thread::sleep_until(shared.t_end);
  if (subscribers) subscribers->end_window();
  const ProcSample end = sample_processes(pids);
  const double client_end = self_cpu_seconds();
  const double machine_end = machine_busy_seconds();
  const auto drain = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.drain_timeout));
  if (!done.wait_for(drain)) {
    r.messages.push_back(fmt::format("turns still running {} s after the end", opt.drain_timeout));
  }
  const ProcSample after = sample_processes(pids);
  sample_metrics(opt, m_after, r);
  runner.stop();
  runner.collect(r);
  if (subscribers) subscribers->finish(r, opt.duration);

  r.window_seconds = opt.duration;
  r.prompts_per_s = static_cast<double>(r.prompts) / opt.duration;
  r.notifications_per_s = static_cast<double>(r.notifications) / opt.duration;
  r.mb_per_s = static_cast<double>(r.bytes) / opt.duration / 1e6;
  r.client_cpu_seconds = client_end - client_warm;
  if (before.ok && warm.ok && end.ok && after.ok) {
    r.have_server = true;
    r.server_cpu_seconds = end.cpu_seconds - warm.cpu_seconds;
    if (r.notifications > 0) {
      r.server_cpu_ms_per_1k_notifications = r.server_cpu_seconds * 1000.0 / (static_cast<double>(r.notifications) / 1000.0);
    }
    r.server_rss_before_kib = before.rss_kib;
    r.server_rss_after_kib = after.rss_kib;
    r.server_peak_rss_kib = after.hwm_kib;
    if (machine_end > machine_warm) {
      r.have_other = true;
      const double other = (machine_end - machine_warm) - r.server_cpu_seconds - r.client_cpu_seconds;
      r.other_cpu_cores = std::max(0.0, other) / opt.duration;
    }
  }
  if (m_before && m_after) {
    r.have_metrics = true;
    r.frames_written = m_after->frames_written - m_before->frames_written;
    r.writes = m_after->writes - m_before->writes;
    if (r.writes > 0) r.frames_per_write = static_cast<double>(r.frames_written) / static_cast<double>(r.writes);
    if (r.notifications_total > 0) {
      r.writes_per_notification = static_cast<double>(r.writes) / static_cast<double>(r.notifications_total);
    }
  }
  if (r.prompts == 0 && r.errors + r.failures == 0) {
    r.messages.push_back("no prompt was answered inside the measurement window: the figures are zero, "
                         "give --duration more time");
  }
  if (opt.smoke && r.prompts_answered < static_cast<std::uint64_t>(opt.connections) * opt.sessions) {
    ++r.failures;
    r.messages.push_back(fmt::format("smoke: only {} prompts answered, expected at least {}", r.prompts_answered,
                                     opt.connections * opt.sessions));
  }
  return r;
}

namespace {

void finish_idle(Results& r, const ProcSample& before, const ProcSample& after, int count) {
  r.idle_count = count;
  if (before.ok && after.ok) {
    r.have_server = true;
    r.server_rss_before_kib = before.rss_kib;
    r.server_rss_after_kib = after.rss_kib;
    r.server_peak_rss_kib = after.hwm_kib;
    r.idle_rss_delta_kib = static_cast<double>(after.rss_kib) - static_cast<double>(before.rss_kib);
    if (count > 0) r.idle_bytes_per_item = r.idle_rss_delta_kib * 1024.0 / count;
  } else {
    r.messages.push_back("no server pid to sample (give --server-pid)");
  }
}

void sleep_for_seconds(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

}  // namespace

Results run_idle_connections(const Options& given) {
  Options opt = given;
  if (opt.read_buffer == 0) opt.read_buffer = 4096;
  Results r;
  r.mode = "idle-connections";
  Runner runner(opt, opt.idle_connections, 0, "", 0);
  const std::vector<pid_t> given_pids = opt.server_pids;
  const ProcSample before = sample_processes(given_pids);
  if (!runner.setup(setup_wave, setup_timeout)) r.messages.push_back("connection setup timed out");
  note_setup_failure(r, runner.initialized(), opt.idle_connections);
  sleep_for_seconds(opt.idle_hold);
  const ProcSample after = sample_processes(runner.server_pids());
  runner.stop();
  runner.collect(r);
  finish_idle(r, before, after, opt.idle_connections);
  return r;
}

Results run_idle_sessions(const Options& given) {
  Options opt = given;
  if (opt.read_buffer == 0) opt.read_buffer = 256 * 1024;
  Results r;
  r.mode = "idle-sessions";
  Runner runner(opt, 1, opt.idle_sessions, "hi", 1);
  if (!runner.setup(1, setup_timeout)) r.messages.push_back("connection setup timed out");
  note_setup_failure(r, runner.initialized(), 1);
  const std::vector<pid_t> pids = runner.server_pids();
  sleep_for_seconds(0.2);
  const ProcSample before = sample_processes(pids);
  Shared& shared = runner.shared();
  shared.t_start = shared.t_warm = Clock::now();
  Latch& done = runner.start(Plan::once);
  if (!done.wait_for(120s)) r.messages.push_back("idle-session turns did not finish within 120 s");
  sleep_for_seconds(opt.idle_hold);
  const ProcSample after = sample_processes(pids);
  runner.stop();
  runner.collect(r);
  finish_idle(r, before, after, opt.idle_sessions);
  return r;
}

}  // namespace bench
