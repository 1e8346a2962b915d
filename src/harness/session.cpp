#include "harness/session.hpp"

#include "detail/turn.hpp"
#include "harness/session_registry.hpp"
#include "harnessd/protocol/events.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "store/errc.hpp"
#include "util/json_fields.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <charconv>
#include <functional>
#include <stdexcept>
#include <system_error>
#include <chrono>
#include <iterator>

namespace harnessd::harness {
namespace json = boost::json;
using llm::ChatMessage;

namespace {

// A session whose last prompt settled this long ago is back after a pause:
// the BulkLane's own pause (bulk_lane.hpp), after which its first slice
// skips the line. A busy session never pauses that long.
constexpr std::int64_t pause_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(BulkLane::default_pass_after).count();

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Far beyond any real session, far below overflow.
constexpr std::int64_t max_turns = std::int64_t{1} << 53;
constexpr std::int64_t max_events = std::int64_t{1} << 53;

/// Concatenates the `text` of blocks of one type.
std::string text_of(const json::value* blocks, std::string_view type) {
  std::string out;
  if (blocks == nullptr || !blocks->is_array()) return out;
  for (const json::value& block : blocks->get_array()) {
    if (!block.is_object()) continue;
    const json::object& b = block.get_object();
    if (util::string_field(b, "type") == type) out += util::string_field(b, "text");
  }
  return out;
}

}  // namespace

Session::Session(Strand strand, std::string id, SessionRegistry& registry,
                 std::optional<std::string> parent_id, int delegation_depth)
    : strand_(std::move(strand)),
      id_(std::move(id)),
      registry_(registry),
      parent_id_(std::move(parent_id)),
      delegation_depth_(delegation_depth),
      last_active_ms_(steady_now_ms()) {}

Session::~Session() = default;

bool Session::try_reserve() noexcept {
  bool expected = false;
  return reserved_.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
}

void Session::release() noexcept {
  touch();
  reserved_.store(false, std::memory_order_release);
}

void Session::touch() noexcept { last_active_ms_.store(steady_now_ms(), std::memory_order_relaxed); }

boost::asio::awaitable<PromptOutcome> Session::prompt(PromptInput input, EventSink& sink) {
  llm::CancelScope scope(strand_);
  struct Release {
    Session& session;
    bool admitted = false;
    ~Release() {
      {
        std::lock_guard lock(session.running_mutex_);
        session.running_ = nullptr;
        session.running_owner_ = nullptr;
      }
      if (admitted) session.registry_.admission().release();
      session.settled_ms_ = steady_now_ms();
      session.release();
    }
  } release{*this};
  {
    std::lock_guard lock(running_mutex_);
    running_ = &scope;
    running_owner_ = input.owner;
  }
  follows_closely_ = false;
  if (input.admit) {
    // Back after as long a pause as lets a session skip the BulkLane's line.
    const bool after_pause = !settled_ms_ || steady_now_ms() - *settled_ms_ >= pause_ms;
    follows_closely_ = !after_pause;
    const Admission::Result admitted = co_await registry_.admission().acquire(scope, after_pause);
    if (admitted == Admission::Result::overloaded) {
      PromptOutcome refused;
      refused.overloaded = true;
      refused.retry_after_ms = registry_.retry_after_ms();
      co_return refused;
    }
    if (admitted == Admission::Result::cancelled) {
      // Never started: no events, nothing logged.
      co_return PromptOutcome{.reason = protocol::TurnEndReason::aborted(scope.reason())};
    }
    release.admitted = true;
  }
  co_await ensure_loaded(input.cwd, store::OpenMode::create);
  std::exception_ptr begin_failure;
  try {
    co_await begin_turn_in_log(sink, input.owner);
  } catch (...) {
    begin_failure = std::current_exception();
  }
  if (begin_failure) {
    // A shared store may hold the lease by now (the catch-up failed after
    // it): give it back, or it would be renewed for as long as the log lives.
    co_await log_->finish_turn();
    std::rethrow_exception(begin_failure);
  }
  PromptOutcome outcome;
  std::exception_ptr failure;
  try {
    outcome = co_await detail::run_turn(*this, input, sink, scope);
  } catch (...) {
    failure = std::current_exception();
  }
  co_await log_->finish_turn();
  // The store failed the turn's writes (the database is gone, or another
  // node took the session over): the turn ends as an error the client can
  // tell apart. Nothing it could not commit was shown to anyone.
  if (failure) outcome.reason = store_failure(failure);
  co_return outcome;
}

bool Session::cancel(const std::string& why, const TurnOwner* owner) {
  std::lock_guard lock(running_mutex_);
  if (running_ == nullptr || (owner != nullptr && owner != running_owner_)) return false;
  return running_->cancel(why);
}

namespace {

[[noreturn]] void refuse_log(const std::string& id, const std::string& why) {
  throw std::system_error(store::errc::invalid_log, "corrupt session log of " + id + ": " + why);
}

}  // namespace

protocol::TurnEndReason Session::store_failure(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::system_error& e) {
    const std::error_code code = e.code();
    if (code != store::errc::unavailable && code != store::errc::lease_lost) throw;
    return protocol::TurnEndReason::error(e.what(), "STORE");
  }
}

boost::asio::awaitable<bool> Session::ensure_loaded(std::optional<std::string> cwd, store::OpenMode mode) {
  // A subscribe and a prompt may both find the session unloaded: the first
  // loads it, the others wait for that load and see its result.
  while (loading_) co_await loaded_->wait();
  if (log_) co_return true;
  loading_ = true;
  if (!loaded_) loaded_ = util::Wakeup::create(strand_);
  struct Done {
    Session& session;
    ~Done() {
      session.loading_ = false;
      session.loaded_->notify();
    }
  } done{*this};
  const bool loaded = co_await load(cwd, mode);
  co_return loaded;
}

std::int64_t Session::subscribe(std::shared_ptr<EventSubscriber> subscriber) {
  subscribers_.push_back(std::move(subscriber));
  return visible_seq_;
}

bool Session::unsubscribe(const EventSubscriber& subscriber) {
  const auto it = std::find_if(subscribers_.begin(), subscribers_.end(),
                               [&](const auto& s) { return s.get() == &subscriber; });
  if (it == subscribers_.end()) return false;
  subscribers_.erase(it);
  return true;
}

void Session::publish(const std::shared_ptr<const std::string>& block, std::size_t count, const TurnOwner* owner) {
  visible_seq_ = written_seq_;
  for (const std::shared_ptr<EventSubscriber>& subscriber : subscribers_) {
    if (owner == nullptr || subscriber->owner() != owner) subscriber->on_logged(block, count);
  }
}

boost::asio::awaitable<bool> Session::load(const std::optional<std::string>& cwd, store::OpenMode mode) {
  store::SessionHeader header;
  header.id = id_;
  header.created_at_ms = now_ms();
  header.cwd = cwd;
  header.parent_session = parent_id_;
  header.delegation_depth = delegation_depth_;
  std::unique_ptr<store::SessionLog> log = co_await registry_.store().open(std::move(header), mode);
  if (!log) co_return false;
  // A child prompted directly after a restart keeps its place in the tree.
  if (const json::value* depth = log->header().if_contains("delegationDepth"); depth && depth->is_int64()) {
    const std::int64_t stored = depth->get_int64();
    if (stored < 0 || stored > registry_.options().max_delegation_depth) {
      refuse_log(id_, "delegationDepth " + std::to_string(stored) + " out of range");
    }
    delegation_depth_ = static_cast<int>(stored);
  }
  if (const json::value* recorded = log->header().if_contains("cwd"); recorded && recorded->is_string()) {
    workspace_ = std::string(recorded->get_string());
  }
  replay(log->take_loaded_events());
  written_seq_ = next_seq_ - 1;
  visible_seq_ = written_seq_;
  log_ = std::move(log);
  if (open_turn_ && log_->closes_open_turn_on_load()) {
    // The daemon stopped inside this turn: close it so every turn has an end.
    const protocol::TurnEnd end{*open_turn_, protocol::TurnEndReason::interrupted()};
    std::string event;
    append_event(event, protocol::TurnEnd::type, json::value_from(end).get_object());
    const std::string_view events[] = {event};
    write_events(events);
    visible_seq_ = written_seq_;  // nobody subscribes before the load is done
    open_turn_.reset();
    co_await log_->end_turn();
  }
  co_return true;
}

void Session::apply_catch_up(store::SessionLog::CatchUp caught, const EventSink::Envelope& envelope) {
  if (caught.from_start) {
    // This node's copy went stale (a failed commit): start over from the store.
    next_seq_ = 0;
    next_turn_ = 0;
    messages_.clear();
    message_seqs_.clear();
    open_turn_.reset();
    written_seq_ = -1;  // also when the store holds no event of it yet (the return below)
  }
  // A load or another catch-up on this strand may have applied some already.
  std::size_t skip = 0;
  while (skip < caught.events.size() && caught.first_seq + static_cast<std::int64_t>(skip) < next_seq_) ++skip;
  if (skip == caught.events.size()) return;
  std::vector<json::object> parsed;
  parsed.reserve(caught.events.size() - skip);
  for (std::size_t i = skip; i < caught.events.size(); ++i) {
    boost::system::error_code ec;
    json::value event = json::parse(caught.events[i], ec);
    if (ec || !event.is_object()) refuse_log(id_, "an event logged by another node is not a JSON object");
    parsed.push_back(std::move(event.get_object()));
  }
  replay(std::move(parsed));
  written_seq_ = next_seq_ - 1;
  // Subscribers here get what other nodes logged since they last heard.
  std::string block;
  std::size_t count = 0;
  for (std::size_t i = skip; i < caught.events.size(); ++i) {
    if (caught.first_seq + static_cast<std::int64_t>(i) <= visible_seq_) continue;
    block += envelope.before;
    block += caught.events[i];
    block += envelope.after;
    block += '\n';
    ++count;
  }
  if (count > 0) publish(std::make_shared<const std::string>(std::move(block)), count, nullptr);
  visible_seq_ = written_seq_;
}

boost::asio::awaitable<void> Session::catch_up(EventSink::Envelope envelope) {
  // A turn running here keeps this node current; one queued here catches up
  // when it begins.
  if (!log_ || !log_->commits_async() || reserved()) co_return;
  store::SessionLog::CatchUp caught = co_await log_->catch_up();
  apply_catch_up(std::move(caught), envelope);
}

boost::asio::awaitable<void> Session::begin_turn_in_log(EventSink& sink, const TurnOwner* owner) {
  store::SessionLog::CatchUp caught = co_await log_->begin_turn();
  // A store of one node has nothing to catch up: no envelope is built then.
  if (!caught.from_start && caught.events.empty() && !open_turn_) co_return;
  const EventSink::Envelope envelope = sink.envelope(id_);
  apply_catch_up(std::move(caught), envelope);
  if (open_turn_) {
    // The node that ran this turn died or lost the session: close the turn
    // as jsonl recovery does, under this node's lease, before a new one.
    const protocol::TurnEnd end{*open_turn_, protocol::TurnEndReason::interrupted()};
    std::string block = envelope.before;
    const std::size_t start = block.size();
    append_event(block, protocol::TurnEnd::type, json::value_from(end).get_object());
    const std::string_view events[] = {std::string_view(block).substr(start)};
    write_events(events);
    open_turn_.reset();
    block += envelope.after;
    block += '\n';
    co_await commit_log();
    co_await deliver(std::make_shared<const std::string>(std::move(block)), 1, sink, owner);
  }
}

boost::asio::awaitable<void> Session::deliver(std::shared_ptr<const std::string> block, std::size_t count,
                                              EventSink& sink, const TurnOwner* owner) {
  publish(block, count, owner);
  co_await sink.on_events(std::move(block), count);
}

boost::asio::awaitable<void> Session::commit_log() {
  if (log_->commits_async()) co_await log_->commit();
}

void Session::replay(std::vector<json::object> events) {
  // Every number the daemon does arithmetic on is checked: a hand-edited or
  // corrupted log is refused, never trusted into an overflow.
  for (json::object& event : events) {
    const std::string_view type = util::string_field(event, "type");
    const json::value* seq = event.if_contains("seq");
    if (seq == nullptr || !seq->is_int64() || seq->get_int64() != next_seq_) {
      refuse_log(id_, "event " + std::to_string(next_seq_) + " has seq " +
                          (seq ? json::serialize(*seq) : std::string("(none)")));
    }
    ++next_seq_;
    const json::value* data = event.if_contains("data");
    if (data == nullptr || !data->is_object()) continue;
    const json::object& d = data->get_object();
    if (type == "turn/start") {
      const json::value* turn = d.if_contains("turn");
      if (turn == nullptr || !turn->is_int64() || turn->get_int64() < next_turn_ ||
          turn->get_int64() >= max_turns) {
        refuse_log(id_, "turn/start at seq " + std::to_string(next_seq_ - 1) + " has an invalid turn");
      }
      open_turn_ = turn->get_int64();
      next_turn_ = *open_turn_ + 1;
    } else if (type == "turn/end") {
      open_turn_.reset();
    }
    apply_to_conversation(next_seq_ - 1, type, d);
  }
  if (next_seq_ >= max_events) refuse_log(id_, "too many events");
}

std::int64_t Session::allocate_turn() {
  if (next_turn_ >= max_turns) throw std::runtime_error("session " + id_ + " has no turn numbers left");
  return next_turn_++;
}

void Session::append_event(std::string& out, std::string_view type, const json::object& data) {
  const std::string data_json = json::serialize(data);
  append_serialized_event(out, type, data_json);
}

void Session::append_message_event(std::string& out, std::string_view type, const json::object& data,
                                   llm::ChatMessage message) {
  message_seqs_.push_back(next_seq_);  // the seq append_event stamps
  append_event(out, type, data);
  messages_.push_back(std::move(message));
}

void Session::append_serialized_event(std::string& event, std::string_view type, std::string_view data_json) {
  // Written by hand: one allocation instead of a JSON object per event.
  // `type` is one of the protocol's event names and needs no escaping; the
  // key order is part of the documented log format.
  char numbers[2][24];
  const auto seq_end = std::to_chars(std::begin(numbers[0]), std::end(numbers[0]), next_seq_++).ptr;
  last_event_time_ms_ = now_ms();
  const auto time_end = std::to_chars(std::begin(numbers[1]), std::end(numbers[1]), last_event_time_ms_).ptr;
  event.reserve(event.size() + 48 + type.size() + data_json.size());
  event += R"({"type":")";
  event += type;
  event += R"(","seq":)";
  event.append(numbers[0], seq_end);
  event += R"(,"time":)";
  event.append(numbers[1], time_end);
  event += R"(,"data":)";
  event += data_json;
  event += '}';
}

std::uint64_t request_header_fingerprint(std::string_view serialized) noexcept {
  return std::hash<std::string_view>{}(serialized);
}

void Session::write_events(std::span<const std::string_view> events) {
  written_seq_ += static_cast<std::int64_t>(events.size());
  // The time of the last event stamped is the time of the last one written:
  // a turn writes every event it made, in order.
  log_->append(events,
               store::LogPosition{.last_seq = written_seq_, .turns = next_turn_, .time_ms = last_event_time_ms_});
}

boost::asio::awaitable<void> Session::end_turn_in_log() { co_await log_->end_turn(); }

// The conversation from logged events: what a loaded session resumes with.
// A live turn hands over its typed messages instead (append_message_event).
void Session::apply_compaction(std::string summary, std::int64_t shadowed_to, std::int64_t summary_seq) {
  // Every message up to shadowed_to (an earlier summary included) gives way
  // to the new summary; the newer ones stay as they are.
  std::size_t kept = 0;
  while (kept < message_seqs_.size() && message_seqs_[kept] <= shadowed_to) ++kept;
  std::vector<ChatMessage> messages;
  std::vector<std::int64_t> seqs;
  messages.reserve(messages_.size() - kept + 1);
  seqs.reserve(messages.capacity());
  messages.push_back(ChatMessage{.role = ChatMessage::Role::user,
                                 .text = "<compacted-summary>\n" + summary + "\n</compacted-summary>"});
  seqs.push_back(summary_seq);
  for (std::size_t i = kept; i < messages_.size(); ++i) {
    messages.push_back(std::move(messages_[i]));
    seqs.push_back(message_seqs_[i]);
  }
  messages_ = std::move(messages);
  message_seqs_ = std::move(seqs);
}

void Session::track_decision_event(std::string_view type, const json::object& data) {
  if (type == "approval/requested") {
    logged_pending_[std::string(util::string_field(data, "approvalId"))] =
        std::string(util::string_field(data, "toolName"));
  } else if (type == "question/requested") {
    logged_pending_[std::string(util::string_field(data, "questionId"))] = std::string();
  } else if (type == "approval/resolved") {
    const auto it = logged_pending_.find(util::string_field(data, "approvalId"));
    if (it == logged_pending_.end()) return;
    if (util::string_field(data, "outcome") == to_string(protocol::ApprovalOutcome::allowed_for_session)) {
      allowed_tools_.insert(it->second);
    }
    logged_pending_.erase(it);
  } else if (type == "question/resolved") {
    if (const auto it = logged_pending_.find(util::string_field(data, "questionId")); it != logged_pending_.end()) {
      logged_pending_.erase(it);
    }
  } else if (type == "turn/start" || type == "turn/end") {
    logged_pending_.clear();  // a wait never outlives its turn
  }
}

void Session::apply_to_conversation(std::int64_t seq, std::string_view type, const json::object& data) {
  track_decision_event(type, data);
  const std::size_t before = messages_.size();
  if (type == "context/message") {
    logged_instructions_[std::string(util::string_field(data, "path"))] =
        std::string(util::string_field(data, "content"));
    return;
  }
  if (type == "request/header") {
    logged_request_header_ = request_header_fingerprint(json::serialize(data));
    return;
  }
  if (type == "compact/summary") {
    const json::value* shadowed = data.if_contains("shadowedSeqs");
    if (shadowed != nullptr && shadowed->is_array() && shadowed->get_array().size() == 2 &&
        shadowed->get_array()[1].is_int64()) {
      apply_compaction(std::string(util::string_field(data, "summary")), shadowed->get_array()[1].get_int64(), seq);
    }
    return;
  }
  if (type == "user/message") {
    messages_.push_back(ChatMessage{.role = ChatMessage::Role::user,
                                    .text = text_of(data.if_contains("content"), "text")});
  } else if (type == "assistant/message") {
    ChatMessage message{.role = ChatMessage::Role::assistant};
    const json::value* content = data.if_contains("content");
    message.text = text_of(content, "text");
    message.reasoning = text_of(content, "reasoning");
    if (content != nullptr && content->is_array()) {
      for (const json::value& block : content->get_array()) {
        if (!block.is_object() || util::string_field(block.get_object(), "type") != "tool-call") continue;
        const json::object& b = block.get_object();
        message.tool_calls.push_back({std::string(util::string_field(b, "id")),
                                      std::string(util::string_field(b, "name")),
                                      std::string(util::string_field(b, "arguments"))});
      }
    }
    messages_.push_back(std::move(message));
  } else if (type == "tool/result") {
    const json::value* is_error = data.if_contains("isError");
    messages_.push_back(ChatMessage{.role = ChatMessage::Role::tool,
                                    .text = text_of(data.if_contains("content"), "text"),
                                    .tool_call_id = std::string(util::string_field(data, "callId")),
                                    .is_error = is_error != nullptr && is_error->is_bool() &&
                                                is_error->get_bool()});
  }
  if (messages_.size() > before) message_seqs_.push_back(seq);
}

}  // namespace harnessd::harness
