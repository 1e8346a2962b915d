#include "mcp/client.hpp"

#include "llm/cancel_scope.hpp"
#include "mcp/content.hpp"
#include "mcp/http_transport.hpp"
#include "mcp/mcp_tool.hpp"
#include "tools/registry.hpp"
#include "util/json_limits.hpp"
#include "util/utf8.hpp"
#include "util/version.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <vector>

namespace harnessd::mcp {

namespace asio = boost::asio;
namespace json = boost::json;
using boost::system::error_code;

bool supported_protocol_version(std::string_view version) {
  // Revisions whose tools/* and lifecycle messages this client speaks.
  return version == "2025-06-18" || version == "2025-03-26" || version == "2025-11-25";
}

std::shared_ptr<Client> Client::create(asio::any_io_executor executor, ServerConfig config, Options options,
                                       tools::ToolRegistry& registry) {
  return std::shared_ptr<Client>(new Client(std::move(executor), std::move(config), std::move(options), registry));
}

Client::Client(asio::any_io_executor executor, ServerConfig config, Options options, tools::ToolRegistry& registry)
    : strand_(asio::make_strand(std::move(executor))),
      config_(std::move(config)),
      options_(options),
      registry_(registry),
      source_("mcp:" + config_.name),
      wait_timer_(strand_) {}

void Client::start() { asio::co_spawn(strand_, supervise(shared_from_this()), asio::detached); }

void Client::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopping_) return;
    self->stopping_ = true;
    if (self->transport_) {
      self->transport_->stop();
      self->transport_.reset();
    }
    ++self->connection_;
    self->fail_pending();
    self->wait_timer_.cancel();
    self->set_state(State::stopped, "the daemon stops");
  });
}

asio::awaitable<tools::ToolResult> Client::call(std::string tool, json::object arguments, llm::CancelScope& cancel) {
  if (cancel.cancelled()) co_return tools::ToolResult::failure("CANCELLED", "cancelled");
  std::shared_ptr<Client> self = shared_from_this();
  auto pending = std::make_shared<Pending>(strand_);
  // The hook runs on the caller's strand; the call lives on the client's.
  llm::CancelScope::Hook hook(cancel, [self, pending] {
    asio::post(self->strand_, [pending] {
      pending->cancelled = true;
      pending->wake();
    });
  });
  auto operation = call_on_strand(self, std::move(tool), std::move(arguments), pending);
  tools::ToolResult result = co_await asio::co_spawn(strand_, std::move(operation), asio::use_awaitable);
  co_return result;
}

asio::awaitable<tools::ToolResult> Client::call_on_strand(std::shared_ptr<Client> self, std::string tool,
                                                          json::object arguments, std::shared_ptr<Pending> pending) {
  if (pending->cancelled) co_return tools::ToolResult::failure("CANCELLED", "cancelled");
  if (self->state_ != State::ready || self->closed_) {
    co_return tools::ToolResult::failure(std::string(unavailable_code), "the MCP server \"" + self->config_.name +
                                                                           "\" is not available (" +
                                                                           self->down_reason_ + ")");
  }
  json::object params{{"name", tool}, {"arguments", std::move(arguments)}};
  const Outcome outcome = co_await request(self, "tools/call", std::move(params), self->config_.call_timeout, pending);
  const std::string server = "the MCP server \"" + self->config_.name + "\"";
  switch (outcome) {
    case Outcome::cancelled: co_return tools::ToolResult::failure("CANCELLED", "cancelled");
    case Outcome::gone:
      co_return tools::ToolResult::failure(std::string(unavailable_code),
                                           server + " went away during the call (" + self->down_reason_ + ")");
    case Outcome::timed_out:
      co_return tools::ToolResult::failure(std::string(timeout_code),
                                           server + " did not answer " + tool + " within " +
                                               std::to_string(self->config_.call_timeout.count()) + " ms");
    case Outcome::answered: break;
  }
  const json::object& answer = *pending->answer;
  if (const json::value* error = answer.if_contains("error"); error != nullptr) {
    std::string message = "error";
    if (error->is_object()) {
      if (const json::value* m = error->get_object().if_contains("message"); m != nullptr && m->is_string()) {
        message = util::valid_utf8(m->get_string());
      }
    }
    co_return tools::ToolResult::failure(std::string(protocol_error_code), server + ": " + message);
  }
  const json::value* result = answer.if_contains("result");
  if (result == nullptr || !result->is_object()) {
    co_return tools::ToolResult::failure(std::string(protocol_error_code), server + " answered without a result");
  }
  co_return to_tool_result(result->get_object(), self->options_.max_result_text_bytes);
}

asio::awaitable<Client::Outcome> Client::request(std::shared_ptr<Client> self, std::string method,
                                                 json::object params, std::chrono::milliseconds timeout,
                                                 std::shared_ptr<Pending> pending) {
  if (pending->cancelled) co_return Outcome::cancelled;
  if (self->closed_ || !self->transport_) co_return Outcome::gone;
  const std::int64_t id = ++self->next_id_;
  json::object message{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
  self->pending_[id] = pending;
  self->transport_->send(json::serialize(message), id);
  pending->timer.expires_after(timeout);
  error_code ec;
  while (!pending->answer && !pending->cancelled && !pending->gone) {
    co_await pending->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) break;  // expired
  }
  self->pending_.erase(id);
  if (pending->answer) co_return Outcome::answered;
  if (pending->gone) co_return Outcome::gone;
  const Outcome outcome = pending->cancelled ? Outcome::cancelled : Outcome::timed_out;
  // The server may stop working on it; initialize is never cancelled (the
  // connection ends instead).
  if (method != "initialize" && self->transport_ && !self->closed_) {
    json::object cancelled{{"requestId", id},
                           {"reason", outcome == Outcome::cancelled ? "the turn was cancelled" : "timed out"}};
    self->notify("notifications/cancelled", std::move(cancelled));
    self->transport_->abandon(id);
  }
  co_return outcome;
}

asio::awaitable<void> Client::supervise(std::shared_ptr<Client> self) {
  std::chrono::milliseconds delay = self->options_.restart_min;
  while (!self->stopping_) {
    const bool was_ready = co_await connect_once(self);
    if (self->stopping_) break;
    if (was_ready) delay = self->options_.restart_min;
    spdlog::info("mcp {}: restarting in {} ms", self->config_.name, delay.count());
    self->wait_timer_.expires_after(delay);
    error_code ec;
    co_await self->wait_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    delay = std::min(delay * 2, self->options_.restart_max);
  }
}

asio::awaitable<bool> Client::connect_once(std::shared_ptr<Client> self) {
  const std::uint64_t connection = ++self->connection_;
  self->closed_ = false;
  self->down_reason_ = "starting";
  self->set_state(State::starting, "");
  self->transport_ = self->config_.url.empty() ? make_stdio_transport(self->strand_, self->config_, self->options_)
                                               : make_http_transport(self->strand_, self->config_, self->options_);
  std::weak_ptr<Client> weak = self;
  Transport::Handlers handlers;
  handlers.on_message = [weak, connection](std::string message) {
    if (auto client = weak.lock(); client && client->connection_ == connection) client->on_message(message);
  };
  handlers.on_closed = [weak, connection](std::string reason) {
    if (auto client = weak.lock(); client && client->connection_ == connection) client->on_closed(std::move(reason));
  };
  self->transport_->start(std::move(handlers));

  json::object client_info{{"name", "harnessd"}, {"version", util::version}};
  json::object params{{"protocolVersion", protocol_version},
                      {"capabilities", json::object()},
                      {"clientInfo", std::move(client_info)}};
  auto pending = std::make_shared<Pending>(self->strand_);
  const Outcome outcome = co_await request(self, "initialize", std::move(params), self->options_.request_timeout, pending);
  std::string problem;
  std::string version;
  if (outcome == Outcome::answered) {
    const json::object& answer = *pending->answer;
    const json::value* result = answer.if_contains("result");
    const json::value* agreed = result != nullptr && result->is_object() ? result->get_object().if_contains("protocolVersion")
                                                                         : nullptr;
    if (agreed != nullptr && agreed->is_string() && supported_protocol_version(agreed->get_string())) {
      version = agreed->get_string();
    } else if (agreed != nullptr && agreed->is_string()) {
      problem = "the server speaks MCP " + util::valid_utf8(agreed->get_string()) + ", not " +
                std::string(protocol_version);
    } else {
      problem = "initialize failed: " + util::valid_utf8(json::serialize(answer)).substr(0, 300);
    }
  } else if (outcome == Outcome::timed_out) {
    problem = "no answer to initialize within " + std::to_string(self->options_.request_timeout.count()) + " ms";
  } else {
    problem = self->down_reason_;
  }
  if (!problem.empty()) {
    if (self->connection_ == connection && !self->stopping_) {
      if (self->transport_) self->transport_->stop();
      self->transport_.reset();
      ++self->connection_;
      self->fail_pending();
      self->set_state(State::down, problem);
    }
    co_return false;
  }
  self->transport_->set_protocol_version(version);
  self->notify("notifications/initialized", json::object());
  self->transport_->listen();
  self->set_state(State::ready, "MCP " + version);
  co_await list_tools(self);
  error_code ec;
  while (!self->closed_ && !self->stopping_) {
    self->wait_timer_.expires_at(asio::steady_timer::time_point::max());
    co_await self->wait_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (self->connection_ == connection && !self->stopping_) {
    if (self->transport_) self->transport_->stop();
    self->transport_.reset();
    ++self->connection_;
    self->fail_pending();
    self->set_state(State::down, self->down_reason_);
  }
  co_return true;
}

asio::awaitable<void> Client::list_tools(std::shared_ptr<Client> self) {
  // One listing at a time; a list_changed during it asks for one more.
  if (self->listing_) {
    self->relist_ = true;
    co_return;
  }
  self->listing_ = true;
  do {
    self->relist_ = false;
    std::vector<std::shared_ptr<tools::Tool>> listed;
    std::set<std::string, std::less<>> names;
    std::string cursor;
    bool complete = false;
    for (int page = 0; page < self->options_.max_list_pages; ++page) {
      json::object params;
      if (!cursor.empty()) params["cursor"] = cursor;
      auto pending = std::make_shared<Pending>(self->strand_);
      const Outcome outcome = co_await request(self, "tools/list", std::move(params), self->options_.request_timeout,
                                               pending);
      if (outcome != Outcome::answered) {
        spdlog::warn("mcp {}: tools/list got no answer; the tools stay as they were", self->config_.name);
        self->listing_ = false;
        co_return;
      }
      const json::value* result = pending->answer->if_contains("result");
      if (result == nullptr || !result->is_object()) {
        spdlog::warn("mcp {}: tools/list failed: {}", self->config_.name,
                     util::valid_utf8(json::serialize(*pending->answer)).substr(0, 300));
        self->listing_ = false;
        co_return;
      }
      const json::object& page_result = result->get_object();
      if (const json::value* entries = page_result.if_contains("tools"); entries != nullptr && entries->is_array()) {
        for (const json::value& entry : entries->get_array()) {
          if (!entry.is_object() || listed.size() >= self->options_.max_tools) continue;
          std::shared_ptr<tools::Tool> tool = make_mcp_tool(self, entry.get_object());
          if (!tool) continue;
          if (!names.emplace(tool->name()).second) {
            spdlog::warn("mcp {}: two tools are named {} once sanitized; the first one is kept", self->config_.name,
                         tool->name());
            continue;
          }
          listed.push_back(std::move(tool));
        }
      }
      const json::value* next = page_result.if_contains("nextCursor");
      if (next == nullptr || !next->is_string() || next->get_string().empty()) {
        complete = true;
        break;
      }
      cursor = next->get_string();
    }
    if (!complete) {
      spdlog::warn("mcp {}: tools/list still had more after {} pages; the rest is left out", self->config_.name,
                   self->options_.max_list_pages);
    }
    const std::size_t count = listed.size();
    for (const std::string& skipped : self->registry_.replace_source(self->source_, std::move(listed))) {
      spdlog::warn("mcp {}: tool {} is left out: another source has a tool of that name", self->config_.name,
                   skipped);
    }
    spdlog::info("mcp {}: {} tool(s)", self->config_.name, count);
  } while (self->relist_ && !self->closed_ && !self->stopping_);
  self->listing_ = false;
}

void Client::on_message(const std::string& text) {
  // JSON strings may carry any bytes from a broken server; repaired here,
  // nothing invalid reaches a tool result or an event.
  std::string repaired = util::valid_utf8(text);
  json::error_code ec;
  json::value message = json::parse(repaired, ec, {}, util::input_parse_options());
  if (ec) {
    spdlog::debug("mcp {}: ignored a message that is not JSON ({} bytes): {}", config_.name, text.size(),
                  ec.message());
    return;
  }
  if (message.is_array()) {
    for (const json::value& element : message.get_array()) on_value(element);
  } else {
    on_value(message);
  }
}

void Client::on_value(const json::value& message) {
  if (!message.is_object()) return;
  const json::object& object = message.get_object();
  const json::value* id = object.if_contains("id");
  if (const json::value* method = object.if_contains("method"); method != nullptr && method->is_string()) {
    if (id != nullptr && !id->is_null()) {
      // A request from the server: ping is answered, the rest (sampling,
      // roots, elicitation) is not offered by this client.
      json::object answer{{"jsonrpc", "2.0"}, {"id", *id}};
      if (method->get_string() == "ping") {
        answer["result"] = json::object();
      } else {
        answer["error"] = json::object{{"code", -32601}, {"message", "method not found"}};
      }
      if (transport_) transport_->send(json::serialize(answer), std::nullopt);
      return;
    }
    if (method->get_string() == "notifications/tools/list_changed" && state_ == State::ready) {
      asio::co_spawn(strand_, list_tools(shared_from_this()), asio::detached);
    }
    return;
  }
  if (id == nullptr || !(id->is_int64() || id->is_uint64())) return;
  const std::int64_t key = id->is_int64() ? id->get_int64() : static_cast<std::int64_t>(id->get_uint64());
  const auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending& pending = *it->second;
  if (pending.answer || pending.gone) return;
  pending.answer = object;
  pending.wake();
}

void Client::on_closed(std::string reason) {
  closed_ = true;
  down_reason_ = std::move(reason);
  fail_pending();
  wait_timer_.cancel();
}

void Client::notify(std::string_view method, json::object params) {
  if (!transport_) return;
  json::object message{{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.empty()) message["params"] = std::move(params);
  transport_->send(json::serialize(message), std::nullopt);
}

void Client::fail_pending() {
  for (auto& [id, pending] : pending_) {
    pending->gone = true;
    pending->wake();
  }
  pending_.clear();
}

void Client::set_state(State state, const std::string& why) {
  state_ = state;
  switch (state) {
    case State::starting: spdlog::info("mcp {}: connecting", config_.name); break;
    case State::ready: spdlog::info("mcp {}: ready ({})", config_.name, why); break;
    case State::down:
      down_reason_ = why;
      spdlog::warn("mcp {}: down: {}", config_.name, why);
      break;
    case State::stopped: spdlog::info("mcp {}: stopped", config_.name); break;
  }
}

}  // namespace harnessd::mcp
