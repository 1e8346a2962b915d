#include "store/pg/listener.hpp"

#include "store/pg/text.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <memory>
#include <system_error>
#include <vector>

namespace harnessd::store::pg {
namespace asio = boost::asio;

Listener::Listener(asio::any_io_executor executor, std::string conninfo, std::chrono::milliseconds idle_in_transaction,
                   const std::atomic<bool>& stopping, std::function<void(std::string)> report_health)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      idle_in_transaction_(idle_in_transaction),
      stopping_(stopping),
      report_health_(std::move(report_health)) {}

void Listener::start() { asio::co_spawn(asio::make_strand(executor_), run(), asio::detached); }

void Listener::on_cancel(std::function<void(const std::string&)> handler) {
  std::lock_guard lock(mutex_);
  on_cancel_ = std::move(handler);
}

void Listener::on_decision(std::function<void(const std::string&)> handler) {
  std::lock_guard lock(mutex_);
  on_decision_ = std::move(handler);
}

void Listener::begin_stop() {
  std::lock_guard lock(mutex_);
  if (listening_ != nullptr) listening_->interrupt();
}

asio::awaitable<void> Listener::run() {
  asio::steady_timer retry(executor_);
  for (;;) {
    try {
      std::unique_ptr<Connection> conn = co_await Connection::open(executor_, conninfo_, idle_in_transaction_);
      struct Listening {
        Listener& listener;
        Listening(Listener& l, Connection* c) : listener(l) {
          std::lock_guard lock(listener.mutex_);
          listener.listening_ = c;
        }
        ~Listening() {
          std::lock_guard lock(listener.mutex_);
          listener.listening_ = nullptr;
        }
      } listening_now(*this, conn.get());
      if (stopping_.load()) co_return;
      static constexpr std::array<std::string_view, 2> channels{cancel_channel, decision_channel};
      for (const std::string_view channel : channels) {
        const std::string listen = "LISTEN " + std::string(channel);
        const Statement statement{listen, {}};
        const Result listening = co_await conn->run(statement);
        checked(listening, "LISTEN");
      }
      report_health_("ok");
      for (;;) {
        std::vector<Notification> notes = co_await conn->notifications();
        std::function<void(const std::string&)> cancel_handler;
        std::function<void(const std::string&)> decision_handler;
        {
          std::lock_guard lock(mutex_);
          cancel_handler = on_cancel_;
          decision_handler = on_decision_;
        }
        for (const Notification& n : notes) {
          if (n.channel == decision_channel) {
            if (decision_handler) decision_handler(n.payload);
            continue;
          }
          cancels_received_.fetch_add(1);
          if (cancel_handler) cancel_handler(n.payload);
        }
      }
    } catch (const std::system_error& e) {
      // begin_stop() ends the connection on purpose: no error to report then.
      if (stopping_.load()) co_return;
      report_health_(reason_of(e));
    }
    if (stopping_.load()) co_return;
    retry.expires_after(std::chrono::milliseconds(500));
    co_await retry.async_wait(asio::use_awaitable);
  }
}

}  // namespace harnessd::store::pg
