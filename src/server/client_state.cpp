#include "server/client_state.hpp"

#include "server/metrics.hpp"

#include <boost/asio/post.hpp>

namespace harnessd::server {

void ClientState::end_subscriptions() {
  for (auto& [id, subscribed] : subscriptions) {
    // Removed on the session's strand, where its subscribers are read.
    boost::asio::post(subscribed.session->strand(),
                      [session = subscribed.session, subscription = subscribed.subscription] {
                        session->unsubscribe(*subscription);
                      });
    context.metrics.subscription_closed();
  }
  subscriptions.clear();
}

}  // namespace harnessd::server
