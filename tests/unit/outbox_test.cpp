#include "server/outbox.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <doctest/doctest.h>

#include <thread>

using harnessd::server::Block;
using harnessd::server::Outbox;
namespace asio = boost::asio;

namespace {
asio::awaitable<void> produce(Outbox& box, int producer, int count) {
  for (int i = 0; i < count; ++i) {
    std::string frame = std::to_string(producer) + ":" + std::to_string(i);
    co_await box.push(std::move(frame));
  }
}

struct CloseResult {
  bool accepted_before = false;
  bool accepted_after = true;
  bool more = true;
  std::vector<Block> taken;
};

asio::awaitable<void> push_close_push_take(Outbox& box, CloseResult& r) {
  std::string a = "a";
  r.accepted_before = co_await box.push(std::move(a));
  box.close();
  std::string b = "b";
  r.accepted_after = co_await box.push(std::move(b));
  r.more = co_await box.take(r.taken);
}

asio::awaitable<void> push_abort_take(Outbox& box, bool& got, std::vector<Block>& taken) {
  std::string x = "x";
  co_await box.push(std::move(x));
  box.abort();
  got = co_await box.take(taken);
}

asio::awaitable<void> consume(Outbox& box, std::vector<std::string>& out, std::size_t& batches) {
  std::vector<Block> batch;
  while (co_await box.take(batch)) {
    ++batches;
    for (auto& f : batch) out.push_back(*f);
    batch.clear();
  }
}
}  // namespace

TEST_CASE("frames from many strands arrive in each pusher's order, batched, under backpressure") {
  asio::io_context io(4);
  auto writer = asio::make_strand(io);
  Outbox box(writer, 64);  // tiny bound: pushers must wait for the writer
  std::vector<std::string> out;
  std::size_t batches = 0;
  asio::co_spawn(writer, consume(box, out, batches), asio::detached);
  constexpr int producers = 4, per_producer = 2000;
  int finished = 0;
  for (int p = 0; p < producers; ++p) {
    asio::co_spawn(asio::make_strand(io), produce(box, p, per_producer), [&](std::exception_ptr) {
      asio::post(writer, [&] {
        if (++finished == producers) box.close();
      });
    });
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { io.run(); });
  io.run();
  for (auto& t : threads) t.join();

  REQUIRE(out.size() == producers * per_producer);
  std::vector<int> next(producers, 0);
  for (const std::string& frame : out) {
    const int p = std::stoi(frame.substr(0, frame.find(':')));
    const int i = std::stoi(frame.substr(frame.find(':') + 1));
    CHECK(i == next[p]);
    next[p] = i + 1;
  }
  CHECK(batches < out.size());
}

TEST_CASE("after close, pushes are refused; after abort, queued frames are dropped") {
  asio::io_context io;
  Outbox box(io.get_executor(), 1024);
  CloseResult r;
  asio::co_spawn(io, push_close_push_take(box, r), asio::detached);
  io.run();
  CHECK(r.accepted_before);
  CHECK_FALSE(r.accepted_after);
  CHECK(r.more);
  REQUIRE(r.taken.size() == 1);
  CHECK(*r.taken[0] == "a");

  asio::io_context io2;
  Outbox aborted(io2.get_executor(), 1024);
  bool got = true;
  std::vector<Block> none;
  asio::co_spawn(io2, push_abort_take(aborted, got, none), asio::detached);
  io2.run();
  CHECK_FALSE(got);
  CHECK(none.empty());
}

TEST_CASE("offer never waits: it queues below the limit and aborts the outbox at it") {
  asio::io_context io;
  Outbox box(io.get_executor(), 16);
  auto block = std::make_shared<const std::string>(std::string(40, 'x'));
  // Over max_bytes (a pusher would wait) but under the limit: still queued.
  CHECK(box.offer(block, 1, 100) == Outbox::Offer::queued);
  CHECK(box.offer(block, 1, 100) == Outbox::Offer::queued);
  CHECK(box.offer(block, 1, 100) == Outbox::Offer::queued);
  CHECK_FALSE(box.overflowed());
  CHECK(box.queued_bytes() == 120);
  // 120 bytes queued, limit 100: the peer cannot keep up, the outbox is cut.
  CHECK(box.offer(block, 1, 100) == Outbox::Offer::overflowed);
  CHECK(box.overflowed());
  CHECK(box.queued_bytes() == 0);
  CHECK(box.offer(block, 1, 1000) == Outbox::Offer::refused);
  // The shared block is only referenced, never copied.
  CHECK(block.use_count() == 1);
}
