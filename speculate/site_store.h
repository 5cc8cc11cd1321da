// SiteStore: the data-critical read sites libtipspec learned for a program, kept between runs in
// the state directory (state_dir.h) as sites/<program key>, so the next run's first child already
// waits where garbage sent the last run's children astray. The key is the main executable's
// build-id; for an interpreter running a script (argv[1] a file that starts with "#!" or has a
// script suffix: .py .pl .rb .js .lua .sh .tcl .php) the script's path is folded in, so each
// script learns for itself. A file holds at most CriticalSites::kCapacity (256) sites, 8 bytes
// each; the directory keeps the kMaxPrograms most recently saved programs. Sites whose waits a run
// found not to pay (site_waits.h: refuted) are kept apart, in refuted-sites/<program key> (same
// format, same bounds): a later run neither loads nor learns them again. Program side only
// (allocates, does file I/O); not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "speculate/read_site.h"
#include "util/status.h"

namespace tipfs::spec {

inline constexpr size_t kMaxPrograms = 1024;

// The key for this process: `main_id` (ObjectTable::main_id) and, for a script, its path from
// `argv`.
uint64_t ProgramKey(uint64_t main_id, const std::vector<std::string>& argv);
// argv of the calling process (/proc/self/cmdline).
std::vector<std::string> OwnArguments();

class SiteStore {
 public:
  explicit SiteStore(uint64_t program_key) : key_(program_key) {}
  // Adds the stored sites to *sites. NotFound when nothing is stored; Corruption for a file that
  // is not a site file (left alone).
  Status Load(CriticalSites* sites) const;
  // Stores the union of `sites` and what is stored now (another run may have learned others).
  Status Save(const CriticalSites& sites) const;
  // Takes `sites` out of the stored sites, keeping those another run saved meanwhile (the file
  // goes when none are left), and adds them to the refuted sites.
  Status Refute(const CriticalSites& sites) const;
  // The refuted sites of refuted-sites/<program key>.
  Status LoadRefuted(CriticalSites* sites) const;
  std::string Path() const;         // empty without a state directory
  std::string RefutedPath() const;  // likewise

 private:
  std::string PathIn(const char* subdirectory) const;
  Status LoadFrom(const std::string& path, CriticalSites* sites) const;
  // Writes `sites` to subdirectory/<key>; with `merge`, united with what the file holds now.
  Status SaveIn(const char* subdirectory, const CriticalSites& sites, bool merge) const;

  uint64_t key_;
};

// Parses a site file; Corruption naming the problem.
Result<std::vector<uint64_t>> ParseSiteFile(const std::string& data);
std::string FormatSiteFile(const std::vector<uint64_t>& sites);

}  // namespace tipfs::spec
