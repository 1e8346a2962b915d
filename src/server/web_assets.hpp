// The web UI (web/), embedded into the binary at build time.
#pragma once

#include <span>
#include <string_view>

namespace harnessd::server {

struct WebAsset {
  std::string_view path;          ///< "/index.html"
  std::string_view content_type;
  std::string_view body;
};

std::span<const WebAsset> web_assets();

}  // namespace harnessd::server
