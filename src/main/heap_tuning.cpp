// glibc gives the top of its heap back to the kernel whenever more than
// 128 KiB of it is free (or twice the largest mapped block freed so far).
// A session streaming large chunks frees more than that at the end of every
// turn, and the next turn faulted the same pages in again: at one session
// with 1 KiB chunks the daemon spent 6 to 8 times the CPU per notification
// that it spends with the top kept. Keeping up to 8 MiB at the top ends
// that; allocations from 1 MiB up still get mappings of their own and go
// back to the kernel when freed.
#include "heap_tuning.hpp"

#include <cstdlib>
#include <cstring>

#include <malloc.h>

namespace harnessd {

namespace {
constexpr int trim_threshold = 8 << 20;
constexpr int mmap_threshold = 1 << 20;
}  // namespace

void tune_heap() {
  if (const char* tunables = std::getenv("GLIBC_TUNABLES"); tunables && std::strstr(tunables, "glibc.malloc.")) return;
#ifdef M_TRIM_THRESHOLD
  mallopt(M_TRIM_THRESHOLD, trim_threshold);
  mallopt(M_MMAP_THRESHOLD, mmap_threshold);
#endif
}

}  // namespace harnessd
