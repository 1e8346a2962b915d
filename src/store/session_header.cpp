#include "store/event_store.hpp"

namespace harnessd::store {

boost::json::object SessionHeader::to_json() const {
  boost::json::object header;
  header["type"] = "session";
  header["version"] = 0;
  header["id"] = id;
  header["createdAt"] = created_at_ms;
  if (cwd) header["cwd"] = *cwd;
  if (parent_session) header["parentSession"] = *parent_session;
  header["delegationDepth"] = delegation_depth;
  return header;
}

}  // namespace harnessd::store
