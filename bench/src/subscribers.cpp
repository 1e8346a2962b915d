#include "subscribers.hpp"

#include "frame_scan.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <atomic>
#include <future>

namespace bench {
namespace asio = boost::asio;

class Subscriber final : public FrameHandler {
 public:
  Subscriber(const Options& opt, asio::any_io_executor ex, const std::string& session_id, int index)
      : ex_(ex), retry_(ex), index_(index) {
    transport_ = opt.target.kind == Target::Kind::ws ? make_ws_transport(ex, opt.target)
                                                     : make_tcp_transport(ex, opt.target, 64 * 1024);
    subscribe_ = fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"session/subscribe","params":{{"sessionId":"{}"}}}})",
                             session_id);
  }

  void start() { asio::co_spawn(ex_, open(), asio::detached); }
  void close() {
    closed_ = true;
    retry_.cancel();
    transport_->close();
  }

  void set_counting(bool on) { counting_ = on; }

  // Read once the io_context has stopped.
  bool subscribed = false;
  bool cut = false;
  std::uint64_t events = 0, events_in_window = 0, gaps = 0;
  std::string error;

  void on_read(std::size_t, Clock::time_point) override {}
  void on_read_done() override { transport_->flush(); }
  void on_closed(const std::string& why) override {
    if (closed_) return;
    cut = true;
    if (error.empty()) error = fmt::format("subscriber {}: {}", index_, why);
  }

  void on_frame(std::string_view text, Clock::time_point) override {
    Frame f = scanner_.scan(text);
    if (f.kind == Frame::Kind::event) {
      ++events;
      if (counting_) ++events_in_window;
      if (next_seq_ >= 0 && f.seq != next_seq_) ++gaps;
      next_seq_ = f.seq + 1;
    } else if (f.kind == Frame::Kind::error && f.id == 1) {
      // The session is created by the load's first prompt: ask again.
      retry_.expires_after(std::chrono::milliseconds(20));
      retry_.async_wait([this](boost::system::error_code ec) {
        if (ec || closed_) return;
        transport_->send(subscribe_);
        transport_->flush();
      });
    } else if (f.kind == Frame::Kind::response && f.id == 1) {
      subscribed = true;
    }
  }

 private:
  asio::awaitable<void> open() {
    try {
      co_await transport_->open();
    } catch (const std::exception& e) {
      error = fmt::format("subscriber {}: connect failed: {}", index_, e.what());
      co_return;
    }
    transport_->start_reading(*this);
    std::string init = R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})";
    transport_->send(init);
    transport_->send(subscribe_);
    transport_->flush();
  }

  asio::any_io_executor ex_;
  asio::steady_timer retry_;
  int index_;
  std::unique_ptr<ClientTransport> transport_;
  FrameScanner scanner_;
  std::string subscribe_;
  std::int64_t next_seq_ = -1;
  bool counting_ = false;
  bool closed_ = false;
};

SubscriberGroup::SubscriberGroup(const Options& opt, std::string session_id) {
  for (int i = 0; i < opt.subscribers; ++i) {
    subscribers_.push_back(std::make_unique<Subscriber>(opt, io_.get_executor(), session_id, i));
    subscribers_.back()->start();
  }
  thread_ = std::thread([this] {
    auto work = asio::make_work_guard(io_);
    io_.run();
  });
}

SubscriberGroup::~SubscriberGroup() {
  if (!finished_) {
    Results ignored;
    finish(ignored, 1);
  }
}

namespace {
/// Runs `f` on the group's thread and waits for it.
template <class F>
void on_thread(asio::io_context& io, F f) {
  std::promise<void> done;
  asio::post(io, [&] {
    f();
    done.set_value();
  });
  done.get_future().wait();
}
}  // namespace

void SubscriberGroup::begin_window() {
  on_thread(io_, [this] {
    for (auto& s : subscribers_) s->set_counting(true);
  });
}

void SubscriberGroup::end_window() {
  on_thread(io_, [this] {
    for (auto& s : subscribers_) s->set_counting(false);
  });
}

void SubscriberGroup::finish(Results& r, double window_seconds) {
  finished_ = true;
  on_thread(io_, [this] {
    for (auto& s : subscribers_) s->close();
  });
  io_.stop();
  thread_.join();
  r.subscribers = static_cast<int>(subscribers_.size());
  for (const auto& s : subscribers_) {
    r.subscribers_subscribed += s->subscribed ? 1 : 0;
    r.subscribers_cut += s->cut ? 1 : 0;
    r.subscriber_gaps += s->gaps;
    r.subscriber_notifications += s->events_in_window;
    if (s->gaps > 0) ++r.failures;
    if (!s->error.empty() && r.messages.size() < 20) r.messages.push_back(s->error);
  }
  if (window_seconds > 0) r.subscriber_notifications_per_s = static_cast<double>(r.subscriber_notifications) / window_seconds;
  if (r.subscriber_gaps > 0) r.messages.push_back(fmt::format("{} seq gaps seen by subscribers", r.subscriber_gaps));
}

}  // namespace bench
