// harness-bench --subscribers N: N more connections follow one session of the
// load with session/subscribe, so a run measures what followers cost the
// turn that feeds them. Each subscriber checks that its events arrive with
// contiguous seq (no gap, no duplicate) and counts them.
#pragma once

#include "load.hpp"

#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace bench {

class Subscriber;

class SubscriberGroup {
 public:
  /// Starts `opt.subscribers` connections on a thread of their own; each
  /// subscribes to `session_id` as soon as it exists.
  SubscriberGroup(const Options& opt, std::string session_id);
  ~SubscriberGroup();

  /// Counts events from here on...
  void begin_window();
  /// ...up to here.
  void end_window();
  /// Stops every connection and the thread; adds the figures to `r`.
  void finish(Results& r, double window_seconds);

 private:
  boost::asio::io_context io_{1};
  std::vector<std::unique_ptr<Subscriber>> subscribers_;
  std::thread thread_;
  bool finished_ = false;
};

}  // namespace bench
