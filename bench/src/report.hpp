// Output of harness-bench: a human-readable table on stdout and every figure
// as JSON for bench/run.sh to tabulate.
#pragma once

#include "load.hpp"

#include <ostream>
#include <string>

namespace bench {

void print_report(std::ostream& out, const Options& opt, const Results& r);
/// Throws std::runtime_error when the file cannot be written.
void write_json(const std::string& path, const Options& opt, const Results& r);

}  // namespace bench
