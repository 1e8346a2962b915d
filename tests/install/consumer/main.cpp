// Runs one turn on `harnessd --stdio` through the installed client and
// prints its status and final answer.
#include <harnessd/client/blocking_client.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer PATH-TO-HARNESSD\n");
    return 2;
  }
  try {
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
