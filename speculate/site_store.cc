#include "speculate/site_store.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "speculate/state_dir.h"

namespace tipfs::spec {

namespace {

constexpr char kMagic[8] = {'T', 'I', 'P', 'S', 'I', 'T', 'E', '1'};
constexpr const char* kScriptSuffixes[] = {".py",  ".pl", ".rb",  ".js",
                                           ".lua", ".sh", ".tcl", ".php"};

bool LooksLikeScript(const std::string& path) {
  for (const char* suffix : kScriptSuffixes) {
    size_t n = strlen(suffix);
    if (path.size() > n && path.compare(path.size() - n, n, suffix) == 0) return true;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char start[2] = {};
  bool shebang = read(fd, start, 2) == 2 && start[0] == '#' && start[1] == '!';
  close(fd);
  return shebang;
}

}  // namespace

std::vector<std::string> OwnArguments() {
  std::vector<std::string> argv;
  Result<std::string> cmdline = ReadWholeFile("/proc/self/cmdline");
  if (!cmdline.ok()) return argv;
  size_t start = 0;
  while (start < cmdline->size()) {
    size_t end = cmdline->find('\0', start);
    if (end == std::string::npos) end = cmdline->size();
    argv.push_back(cmdline->substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

uint64_t ProgramKey(uint64_t main_id, const std::vector<std::string>& argv) {
  uint64_t key = main_id;
  if (argv.size() >= 2 && !argv[1].empty() && argv[1][0] != '-' && LooksLikeScript(argv[1])) {
    char resolved[4096];
    std::string script = realpath(argv[1].c_str(), resolved) != nullptr ? resolved : argv[1];
    for (unsigned char c : script) key = (key ^ c) * 1099511628211ull;  // FNV-1a step
  }
  return key;
}

Result<std::vector<uint64_t>> ParseSiteFile(const std::string& data) {
  if (data.size() < sizeof(kMagic) || memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption("not a tipfs site file (bad magic)");
  }
  size_t n = (data.size() - sizeof(kMagic)) / sizeof(uint64_t);
  if (sizeof(kMagic) + n * sizeof(uint64_t) != data.size()) {
    return Status::Corruption("site file of " + std::to_string(data.size()) +
                              " bytes: not a whole number of sites");
  }
  if (n > CriticalSites::kCapacity) {
    return Status::Corruption("site file with " + std::to_string(n) + " sites, more than " +
                              std::to_string(CriticalSites::kCapacity));
  }
  std::vector<uint64_t> sites(n);
  memcpy(sites.data(), data.data() + sizeof(kMagic), n * sizeof(uint64_t));
  return sites;
}

std::string FormatSiteFile(const std::vector<uint64_t>& sites) {
  std::string data(kMagic, sizeof(kMagic));
  data.append(reinterpret_cast<const char*>(sites.data()), sites.size() * sizeof(uint64_t));
  return data;
}

std::string SiteStore::PathIn(const char* subdirectory) const {
  std::string top = StateDirectoryPath();
  if (top.empty()) return "";
  char name[32];
  snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key_));
  return top + "/" + subdirectory + "/" + name;
}

std::string SiteStore::Path() const { return PathIn(kSitesSubdirectory); }
std::string SiteStore::RefutedPath() const { return PathIn(kRefutedSitesSubdirectory); }

Status SiteStore::LoadFrom(const std::string& path, CriticalSites* sites) const {
  if (path.empty()) return Status::NotFound("no state directory");
  Result<std::string> data = ReadPrivateFile(path);
  if (!data.ok()) return data.status();
  Result<std::vector<uint64_t>> stored = ParseSiteFile(*data);
  if (!stored.ok()) return stored.status().WithContext(path);
  for (uint64_t site : *stored) sites->Insert(site);
  return Status::OK();
}

Status SiteStore::Load(CriticalSites* sites) const { return LoadFrom(Path(), sites); }
Status SiteStore::LoadRefuted(CriticalSites* sites) const { return LoadFrom(RefutedPath(), sites); }

Status SiteStore::SaveIn(const char* subdirectory, const CriticalSites& sites, bool merge) const {
  Result<std::string> dir = StateSubdirectory(subdirectory);
  if (!dir.ok()) return dir.status();
  const std::string path = PathIn(subdirectory);
  CriticalSites merged = sites;
  if (merge) (void)LoadFrom(path, &merged);  // a missing or unreadable file is replaced
  std::vector<uint64_t> all(merged.size());
  all.resize(merged.CopyTo(all.data(), all.size()));
  TIPFS_RETURN_IF_ERROR(WritePrivateFile(path, FormatSiteFile(all)));
  PruneOldest(*dir, kMaxPrograms);
  return Status::OK();
}

Status SiteStore::Save(const CriticalSites& sites) const {
  return SaveIn(kSitesSubdirectory, sites, /*merge=*/true);
}

Status SiteStore::Refute(const CriticalSites& sites) const {
  // Refuted first: should the rest fail, no later run loads them anyway.
  TIPFS_RETURN_IF_ERROR(SaveIn(kRefutedSitesSubdirectory, sites, /*merge=*/true));
  CriticalSites kept;
  Status loaded = Load(&kept);
  if (loaded.error() == ENOENT) return Status::OK();
  TIPFS_RETURN_IF_ERROR(loaded);
  kept.RemoveAll(sites);
  if (kept.size() > 0) return SaveIn(kSitesSubdirectory, kept, /*merge=*/false);
  const std::string path = Path();
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove " + path);
  return Status::OK();
}

}  // namespace tipfs::spec
