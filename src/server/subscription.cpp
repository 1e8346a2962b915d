#include "server/subscription.hpp"

#include "server/metrics.hpp"

namespace harnessd::server {
namespace asio = boost::asio;

Subscription::Subscription(const harness::TurnOwner* owner, std::shared_ptr<Outbox> outbox, std::size_t max_bytes,
                           Metrics& metrics)
    : EventSubscriber(owner), outbox_(std::move(outbox)), max_bytes_(max_bytes), metrics_(metrics) {}

void Subscription::on_logged(const Block& block, std::size_t count) {
  Outbox::Offer result;
  {
    std::lock_guard lock(mutex_);
    if (!live_) {
      pending_bytes_ += block->size();
      pending_.emplace_back(block, count);
      if (pending_bytes_ <= max_bytes_) return;
      pending_.clear();
      pending_bytes_ = 0;
      result = outbox_->overflow();
    } else {
      result = outbox_->offer(block, count, max_bytes_);
    }
  }
  if (result == Outbox::Offer::queued) metrics_.notifications_queued(count);
  if (result == Outbox::Offer::overflowed) metrics_.subscriber_cut();
}

asio::awaitable<void> Subscription::go_live() {
  std::vector<std::pair<Block, std::size_t>> blocks;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (pending_.empty()) {
        live_ = true;
        co_return;
      }
      blocks.swap(pending_);
      pending_bytes_ = 0;
    }
    for (auto& [block, count] : blocks) {
      if (co_await outbox_->push(std::move(block), count)) metrics_.notifications_queued(count);
    }
    blocks.clear();
  }
}

}  // namespace harnessd::server
