#pragma once

namespace harnessd {

/// Sets glibc's heap thresholds for a daemon whose turns allocate and free
/// megabytes at a time, unless GLIBC_TUNABLES already sets malloc's own.
void tune_heap();

}  // namespace harnessd
