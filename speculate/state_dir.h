// The per-user directory where libtipspec keeps what it learns about programs: the
// data-critical read sites of each program (sites/). It is $XDG_STATE_HOME/tipfs, else
// $HOME/.local/state/tipfs, else the passwd entry's home; TIPSPEC_STATE_DIR overrides all of them.
// Created with mode 0700; a directory or file owned by someone else, or that group or others may
// write, is refused, for writing and for reading (recordings name files the user read). Thread-safe
// (no state).
#pragma once

#include <string>

#include "util/status.h"

namespace tipfs::spec {

// Where SiteStore keeps each program's learned sites, and those refuted since.
inline constexpr char kSitesSubdirectory[] = "sites";
inline constexpr char kRefutedSitesSubdirectory[] = "refuted-sites";

// The directory's path (not created, not checked). Empty when no home is known.
std::string StateDirectoryPath();
// `sub` (e.g. "sites") under the state directory, created (with its parents) if missing and
// checked as above.
Result<std::string> StateSubdirectory(const std::string& sub);

// Writes `data` to `path` atomically (a temporary file in the same directory, fsync'ed and
// renamed over it), mode 0600.
Status WritePrivateFile(const std::string& path, const std::string& data);
// The whole file, or NotFound.
Result<std::string> ReadWholeFile(const std::string& path);
// The whole file `path` of the state directory, or NotFound; EPERM when the file, its directory or
// the state directory belongs to another user or others may write it (what another user
// recorded is never used: it names their files, and a file planted by someone else is not ours).
Result<std::string> ReadPrivateFile(const std::string& path);

// Removes every file of the state directory's `sub` (a missing one holds none) and returns how
// many went; the first removal that fails is the error.
Result<size_t> ClearStateSubdirectory(const std::string& sub);

// Forgets what every program learned: removes all site and refuted-site files (`tipfs run
// --sites-clear`). Returns how many files went.
Result<size_t> ClearSiteFiles();

// Keeps at most `max_files` regular files in `dir`, removing the oldest (by mtime) first.
void PruneOldest(const std::string& dir, size_t max_files);

}  // namespace tipfs::spec
