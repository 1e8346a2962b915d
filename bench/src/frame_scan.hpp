// Classifies server frames for harness-bench without parsing them whole: the
// bench must read faster than servers write, so session.event notifications
// and responses are recognised by string scans, the rest by Boost.JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bench {

/// What the bench needs to know about a frame.
struct Frame {
  enum class Kind {
    event,         ///< session.event notification: session_id, type, seq, chunk_type
    response,      ///< `result` response: id, status (empty when result has none)
    error,         ///< `error` response: id (or has_id false for id null), message
    notification,  ///< any other notification (subagent.*), ignored by the checks
    request,       ///< a frame with both id and method: servers never send those
    invalid,       ///< not JSON or not a JSON-RPC message
  };
  Kind kind = Kind::invalid;
  std::string_view session_id;
  std::string_view type;
  std::string_view chunk_type;  ///< assistant/chunk only: the chunk's type
  std::int64_t seq = -1;
  bool has_id = false;
  std::int64_t id = -1;  ///< integer ids only; the bench only sends integers
  std::string_view status;
  std::string_view message;
  bool slow = false;  ///< true when the Boost.JSON fallback was used
};

/// Scans frames; the views in a Frame point into the frame or into this
/// scanner's scratch space and stay valid until the next scan().
///
/// Fast path assumption: the server writes compact JSON with keys in the
/// order docs/protocol.md documents and harnessd, the Node reference peer and the
/// floor all use:
///   {"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"ID",
///    "event":{"type":"T","seq":N,"time":MS,"data":{"turn":N,"step":N,
///    "chunk":{"type":"CT",...}...}}}}
///   {"jsonrpc":"2.0","id":N,"result":{"status":"S",...}}
/// A session id or type with a backslash, a missing key or another order
/// makes the frame take the Boost.JSON fallback, which is correct for any
/// layout (only slower); Frame::slow counts how often that happens.
class FrameScanner {
 public:
  Frame scan(std::string_view frame);

 private:
  bool fast(std::string_view frame, Frame& out);
  Frame slow(std::string_view frame);

  std::string session_id_;
  std::string type_;
  std::string chunk_type_;
  std::string status_;
  std::string message_;
};

}  // namespace bench
