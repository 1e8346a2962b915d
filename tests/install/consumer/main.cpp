// Runs one turn on `harnessd --stdio` through the installed client and
// prints its status and final answer. Before that it reads and writes
// protocol types with their JSON conversions, so every conversion the
// installed headers declare must link from the installed libraries.
#include <harnessd/client/blocking_client.hpp>
#include <harnessd/protocol/chunk.hpp>
#include <harnessd/protocol/events.hpp>
#include <harnessd/protocol/messages.hpp>
#include <harnessd/protocol/notifications.hpp>

#include <boost/json/parse.hpp>

#include <cstdio>
#include <exception>

namespace {

namespace json = boost::json;
namespace protocol = harnessd::protocol;

/// `text` read as T and written back; true when nothing changed.
template <class T>
bool round_trips(const char* text) {
  const json::value wire = json::parse(text);
  return json::value_from(json::value_to<T>(wire)) == wire;
}

bool conversions_link() {
  return round_trips<protocol::PromptParams>(R"({"sessionId":"s","contentBlocks":[{"type":"text","text":"hi"}]})") &&
         round_trips<protocol::PromptResult>(R"({"status":"ok","reason":{"kind":"completed"}})") &&
         round_trips<protocol::ListResult>(
             R"({"sessions":[{"sessionId":"s","createdAt":1,"updatedAt":2,"lastSeq":3,"turns":1,"running":false}]})") &&
         round_trips<protocol::DeleteParams>(R"({"sessionId":"s"})") &&
         round_trips<protocol::TurnEnd>(R"({"turn":0,"reason":{"kind":"aborted","reason":"cancelled"}})") &&
         round_trips<protocol::Chunk>(R"({"type":"text-delta","index":0,"text":"x"})") &&
         round_trips<protocol::SubagentStarted>(R"({"parentSessionId":"p","childSessionId":"c"})");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer PATH-TO-HARNESSD\n");
    return 2;
  }
  try {
    if (!conversions_link()) {
      std::fprintf(stderr, "consumer: a protocol type did not round-trip\n");
      return 1;
    }
    harnessd::client::SpawnOptions options;
    options.program = argv[1];
    options.args = {"--store", "memory"};
    auto client = harnessd::client::BlockingClient::spawn(options);
    client->initialize().get();
    harnessd::client::BlockingHarness harness(*client);
    const harnessd::client::TurnResult turn = harness.run("consumer-1", "hello from an installed client").get();
    std::printf("%s %s\n", turn.status.c_str(), turn.final_response.c_str());
    client->close().get();
    return turn.status == "ok" ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
