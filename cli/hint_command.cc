// `tipfs hint`: disclose from the shell which files (or ranges) will be read, in order. The
// default source, warmup, prefetches them in the given order whoever reads them later: a cache
// warm-up before a job starts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "cli/mount_table.h"
#include "tipfs/hint.h"
#include "util/mount_table.h"
#include "util/units.h"

namespace tipfs::cli {
namespace {

struct HintArgs {
  std::vector<std::string> specs;
  std::string list_file;
  std::string source = "warmup";
};

struct Target {
  std::string path;  // canonical, inside a tipfs mount
  uint64_t offset = 0;
  uint64_t length = 0;  // 0: to end of file
};

// PATH, PATH:OFFSET or PATH:OFFSET:LENGTH. A path that itself contains ':' is taken whole when
// a file of that name exists.
Result<Target> ParseTarget(const std::string& spec) {
  Target target;
  std::string path = spec;
  if (access(spec.c_str(), F_OK) != 0) {
    std::vector<std::string> numbers;
    for (int i = 0; i < 2; ++i) {
      size_t colon = path.rfind(':');
      if (colon == std::string::npos) break;
      numbers.insert(numbers.begin(), path.substr(colon + 1));
      path.resize(colon);
      if (access(path.c_str(), F_OK) == 0) break;
    }
    if (!numbers.empty()) {
      Result<uint64_t> offset = ParseSize(numbers[0]);
      if (!offset.ok()) return offset.status().WithContext(spec);
      target.offset = *offset;
      if (numbers.size() > 1) {
        Result<uint64_t> length = ParseSize(numbers[1]);
        if (!length.ok()) return length.status().WithContext(spec);
        target.length = *length;
      }
    }
  }
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return ErrnoStatus(path);
  target.path = resolved;
  return target;
}

// The tipfs mount holding `path` (the longest matching mount point).
Result<std::string> MountOf(const std::string& path) {
  std::string best;
  for (const MountEntry& entry : ReadMountTable()) {
    if (entry.fstype != "fuse.tipfs") continue;
    const std::string& mp = entry.mountpoint;
    if (path.compare(0, mp.size(), mp) == 0 &&
        (path.size() == mp.size() || path[mp.size()] == '/') && mp.size() > best.size()) {
      best = mp;
    }
  }
  if (best.empty()) return Status::InvalidArgument(path + " is not inside a tipfs mount");
  return best;
}

int RunHint(const HintArgs& args) {
  if (args.source != "warmup") {
    return Usage("hint", "--source " + args.source +
                             ": only warmup hints can outlive this command (programs disclose "
                             "their own hints through tipfs_hint(3))");
  }
  std::vector<std::string> specs = args.specs;
  if (!args.list_file.empty()) {
    std::ifstream in(args.list_file == "-" ? "/dev/stdin" : args.list_file);
    if (!in) return Fail("hint", ErrnoStatus("cannot read " + args.list_file));
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) specs.push_back(line);
    }
  }
  if (specs.empty()) return Usage("hint", "nothing to hint (give PATHs or --list FILE)");

  std::string mount;
  auto request = std::make_unique<tipfs_hint_paths>();
  tipfs_hint_paths_init(request.get(), TIPFS_SOURCE_WARMUP, TIPFS_STREAM_SELF, 0);
  int fd = -1;
  size_t hinted = 0;
  for (const std::string& spec : specs) {
    Result<Target> target = ParseTarget(spec);
    if (!target.ok()) return Fail("hint", target.status());
    // The daemon checks the same with the caller's credentials, but answers only an errno for the
    // whole request: find the path at fault here, so the message can name it.
    struct stat st;
    if (stat(target->path.c_str(), &st) != 0) return Fail("hint", ErrnoStatus(spec));
    if (S_ISDIR(st.st_mode)) {
      return Fail("hint", Status::FromErrno(EISDIR, spec + " is a directory (hint its files)"));
    }
    if (access(target->path.c_str(), R_OK) != 0) return Fail("hint", ErrnoStatus(spec));
    Result<std::string> target_mount = MountOf(target->path);
    if (!target_mount.ok()) return Fail("hint", target_mount.status());
    if (mount.empty()) {
      mount = *target_mount;
      fd = open(mount.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return Fail("hint", ErrnoStatus("open " + mount));
    } else if (*target_mount != mount) {
      return Fail("hint", Status::InvalidArgument(spec + " is on another mount than " + mount));
    }
    // Relative to the mount's root (a leading '/' would mean an absolute path to the daemon).
    std::string relative = target->path.size() > mount.size()
                               ? target->path.substr(mount.size() + 1)
                               : std::string(".");
    if (tipfs_hint_paths_add(request.get(), relative.c_str(), target->offset, target->length) !=
        0) {
      if (errno != ENOSPC || tipfs_hint_paths_send(fd, request.get()) != 0 ||
          tipfs_hint_paths_add(request.get(), relative.c_str(), target->offset, target->length) !=
              0) {
        return Fail("hint", ErrnoStatus("hints up to " + spec + " on " + mount));
      }
    }
    ++hinted;
  }
  if (tipfs_hint_paths_send(fd, request.get()) != 0) {
    return Fail("hint", ErrnoStatus("hints for " + std::to_string(hinted) + " files on " + mount));
  }
  close(fd);
  std::printf("tipfs: hinted %zu file%s on %s for warm-up\n", hinted, hinted == 1 ? "" : "s",
              mount.c_str());
  return 0;
}

}  // namespace

Runner AddHintCommand(CLI::App* app) {
  auto args = std::make_shared<HintArgs>();
  app->add_option("--list", args->list_file,
                  "Read more PATH[:OFFSET[:LENGTH]] lines from FILE (- = stdin)")
      ->option_text("FILE");
  app->add_option("--source", args->source, "Hint source: warmup (prefetch in this order)")
      ->option_text("warmup");
  app->add_option("PATH", args->specs,
                  "PATH[:OFFSET[:LENGTH]] inside a tipfs mount, in read order");
  return [args] { return RunHint(*args); };
}

}  // namespace tipfs::cli
