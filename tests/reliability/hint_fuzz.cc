#include "tests/reliability/hint_fuzz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "fusefs/control_files.h"
#include "fusefs/disk_array.h"
#include "fusefs/hint_ioctls.h"
#include "fusefs/stats_report.h"
#include "stripe/disk_health.h"
#include "stripe/emulation/emulated_array.h"
#include "tests/support/volume_rig.h"
#include "tipfs/hint.h"
#include "util/statistics.h"

namespace tipfs::testing {

namespace {

constexpr char kMount[] = "/mnt/tipfs-fuzz";
constexpr uint64_t kGlobalCap = 32ull << 20;
constexpr uint64_t kProcessCap = 8ull << 20;
constexpr uint32_t kCaller = 1000;  // the callers' uid and gid
constexpr uint32_t kOwner = 2000;   // owner of the files the callers may not read
// Resident memory the daemon may grow by over a run (the cache holds 16 MiB, hints are capped).
constexpr uint64_t kMaxGrowthBytes = 512ull << 20;

// Reads the input as a stream of numbers; past its end every read is 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t U32() { return U8() | U8() << 8 | U8() << 16 | static_cast<uint32_t>(U8()) << 24; }
  uint64_t U64() { return U32() | static_cast<uint64_t>(U32()) << 32; }
  template <typename T>
  const T& Pick(const std::vector<T>& options) {
    return options[U8() % options.size()];
  }
  // Offsets and lengths where the interesting ones are likely: 0, small, near a file's end,
  // huge, overflowing.
  uint64_t Extent(uint64_t file_size) {
    switch (U8() % 8) {
      case 0:
        return 0;
      case 1:
        return U8();
      case 2:
        return U32() % (file_size + 1);
      case 3:
        return file_size + U8();
      case 4:
        return uint64_t{INT64_MAX} - U8();
      case 5:
        return ~uint64_t{0} - U8();
      case 6:
        return static_cast<uint64_t>(U8()) << 16;
      default:
        return U64();
    }
  }
  void Fill(void* out, size_t n) {
    for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(out)[i] = U8();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

uint64_t ResidentBytes() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return static_cast<uint64_t>(pages_resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

struct HintFuzzer::State {
  std::function<void(const std::string&)> fail;
  VolumeRig rig{4, 64 * 1024};
  Statistics statistics;
  fusefs::DiskArray disks;
  std::unique_ptr<fusefs::HintIoctls> hints;
  fusefs::ControlFiles control;
  std::unique_ptr<fusefs::StatsReport> report;

  std::vector<uint64_t> readable;                       // regular files the callers may read
  std::vector<std::pair<uint64_t, std::string>> names;  // theirs: (parent, name)
  std::vector<uint64_t> secret;                         // regular files they may not
  std::vector<uint64_t> others;    // directories, symlinks, a fifo, missing and control inodes
  std::vector<std::string> paths;  // for path hints: good, secret, broken, hostile
  std::vector<uint32_t> pids;
  uint64_t calls = 0, accepted = 0;
  uint64_t baseline_rss = 0;
  uint32_t serial = 0;

  fusefs::FileSystem* fs() { return rig.fs(); }
  cache::FileCache* cache() { return rig.fs()->cache(); }

  uint64_t MakeFile(uint64_t parent, const std::string& name, uint32_t mode, uint32_t owner,
                    size_t size) {
    auto opened = fs()->Create(fusefs::Caller{owner, owner, 0}, parent, name, mode, O_RDWR);
    if (!opened.ok()) {
      fail("setup: create " + name + ": " + opened.status().ToString());
      return 0;
    }
    std::string data(size, static_cast<char>('a' + serial++ % 26));
    if (size > 0) (void)fs()->Write(opened->inode.ino, 0, data.data(), data.size());
    (void)fs()->Release(opened->inode.ino);
    return opened->inode.ino;
  }
  uint64_t MakeDir(uint64_t parent, const std::string& name, uint32_t mode, uint32_t owner) {
    auto dir = fs()->MakeNode(fusefs::Caller{owner, owner, 0}, parent, name, S_IFDIR | mode, 0);
    return dir.ok() ? dir->ino : 0;
  }

  void Setup() {
    cache::CacheOptions options;
    options.capacity_bytes = 16 << 20;
    options.per_process_hint_cap_bytes = kProcessCap;
    options.global_hint_cap_bytes = kGlobalCap;
    options.per_process_hint_segment_cap = 2048;
    options.global_hint_segment_cap = 8192;
    rig.set_cache_options(options);
    if (!rig.Open().ok()) return fail("setup: open the rig");
    auto emulation = stripe::EmulatedArray::Create("hdd", SystemClock::Default(), &statistics);
    if (emulation.ok()) disks.emulation = *emulation;
    disks.health = std::make_shared<stripe::DiskHealthBoard>();
    hints = std::make_unique<fusefs::HintIoctls>(fs(), cache(), kMount);
    report = std::make_unique<fusefs::StatsReport>(fs(), cache(), &disks, hints.get(), &statistics,
                                                   SystemClock::Default(), kMount);
    report->Register(&control);

    const uint64_t dir = MakeDir(meta::kRootIno, "dir", 0755, kCaller);
    const uint64_t vault = MakeDir(meta::kRootIno, "vault", 0700, kOwner);  // no search for them
    readable = {MakeFile(meta::kRootIno, "empty", 0644, kCaller, 0),
                MakeFile(meta::kRootIno, "small", 0644, kCaller, 3000),
                MakeFile(meta::kRootIno, "big", 0644, kCaller, 3 << 20),
                MakeFile(dir, "inner", 0644, kCaller, 300'000),
                MakeFile(meta::kRootIno, "others-but-readable", 0644, kOwner, 100'000)};
    names = {{meta::kRootIno, "empty"},
             {meta::kRootIno, "small"},
             {meta::kRootIno, "big"},
             {dir, "inner"},
             {meta::kRootIno, "others-but-readable"}};
    secret = {MakeFile(meta::kRootIno, "secret", 0600, kOwner, 500'000),
              MakeFile(vault, "hidden", 0644, kOwner, 200'000)};
    auto link = fs()->MakeNode(fusefs::Caller{kCaller, kCaller, 0}, meta::kRootIno, "link",
                               S_IFLNK | 0777, 0, "dir/inner");
    (void)fs()->MakeNode(fusefs::Caller{kCaller, kCaller, 0}, meta::kRootIno, "loop",
                         S_IFLNK | 0777, 0, "loop");
    (void)fs()->MakeNode(fusefs::Caller{kCaller, kCaller, 0}, meta::kRootIno, "out", S_IFLNK | 0777,
                         0, "/etc/passwd");
    (void)fs()->MakeNode(fusefs::Caller{kCaller, kCaller, 0}, meta::kRootIno, "to-secret",
                         S_IFLNK | 0777, 0, "secret");
    auto fifo = fs()->MakeNode(fusefs::Caller{kCaller, kCaller, 0}, meta::kRootIno, "fifo",
                               S_IFIFO | 0644, 0);
    others = {meta::kRootIno,
              dir,
              vault,
              999'999,
              fusefs::ControlFiles::kDirIno,
              fusefs::ControlFiles::kDirIno + 1};
    if (link.ok()) others.push_back(link->ino);
    if (fifo.ok()) others.push_back(fifo->ino);
    paths = {"big",
             "/mnt/tipfs-fuzz/small",
             "dir/inner",
             "link",
             "./dir/../big",
             "//big//",
             "secret",
             "vault/hidden",
             "to-secret",
             "/mnt/tipfs-fuzz/vault/hidden",
             "loop",
             "out",
             "fifo",
             "dir",
             "missing",
             "/etc/passwd",
             "/mnt/tipfs-fuzzer/big",
             "big/",
             "big/x",
             "..",
             "../../big",
             std::string(300, 'n'),
             std::string(4095, '/'),
             std::string("bi\0g", 4),
             ".tipfs/stats",
             "empty",
             "others-but-readable"};
    pids = {static_cast<uint32_t>(getpid()), static_cast<uint32_t>(getppid()), 1, 4'000'000};
    baseline_rss = ResidentBytes();
  }

  fusefs::IoctlCaller PickCaller(Bytes* in) {
    // Never root: root may read everything, and the secrets must stay uncached.
    const uint32_t uid = in->U8() % 2 == 0 ? kCaller : 3000;
    return fusefs::IoctlCaller{uid, kCaller, in->Pick(pids)};
  }
  uint64_t AnyFile(Bytes* in) { return in->Pick(readable); }

  void Ioctl(Bytes* in) {
    static const std::vector<unsigned int> kCommands = {TIPFS_IOC_HINT_FD,
                                                        TIPFS_IOC_HINT_PATHS,
                                                        TIPFS_IOC_CANCEL,
                                                        TIPFS_IOC_QUERY,
                                                        TIPFS_IOC_SPEC_ATTACH,
                                                        TIPFS_IOC_SPEC_DETACH,
                                                        0,
                                                        0xC0DE};
    unsigned int command = in->Pick(kCommands);
    if (command == 0xC0DE) command = in->U32();
    size_t expected = 0;
    switch (command) {
      case TIPFS_IOC_HINT_FD:
        expected = sizeof(tipfs_hint_fd);
        break;
      case TIPFS_IOC_HINT_PATHS:
        expected = sizeof(tipfs_hint_paths);
        break;
      case TIPFS_IOC_CANCEL:
        expected = sizeof(tipfs_cancel);
        break;
      case TIPFS_IOC_QUERY:
        expected = sizeof(tipfs_query);
        break;
      default:
        expected = sizeof(tipfs_spec_attach);
    }
    const size_t in_size =
        in->U8() % 8 != 0 ? expected : in->U32() % (sizeof(tipfs_hint_paths) + 64);
    std::vector<uint8_t> buffer(std::max(in_size, sizeof(tipfs_hint_paths)) + 8, 0);
    auto* header = reinterpret_cast<tipfs_hint_header*>(buffer.data());
    header->version = in->U8() % 16 != 0 ? TIPFS_HINT_VERSION : in->U32();
    header->source = in->U8() % 5;
    const uint32_t me = static_cast<uint32_t>(getpid());
    switch (in->U8() % 6) {
      case 0:
        header->stream = TIPFS_STREAM_SELF;
        break;
      case 1:
        header->stream = me;
        break;
      case 2:
        header->stream = getppid();
        break;
      case 3:
        header->stream = (uint64_t{1} << 32) | in->U8();
        break;
      case 4:
        header->stream = uint64_t{1} << 32;
        break;
      default:
        header->stream = in->U64();
    }
    header->epoch = in->U8() % 4;
    const uint32_t count_choice = in->U8() % 4;
    header->count = count_choice == 0 ? in->U32() : count_choice == 1 ? 1 : in->U8() % 64;

    uint64_t target = AnyFile(in);
    int open_flags = O_RDONLY;
    switch (in->U8() % 8) {
      case 0:
        target = in->Pick(others);
        break;
      case 1:
        open_flags = O_WRONLY;
        break;
      case 2:
        open_flags = O_RDWR;
        break;
      default:
        break;
    }
    auto target_inode = fs()->GetAttr(target);
    const uint64_t size = target_inode.ok() ? target_inode->size : 0;
    if (command == TIPFS_IOC_HINT_FD) {
      auto* request = reinterpret_cast<tipfs_hint_fd*>(buffer.data());
      const uint32_t n = std::min<uint32_t>(header->count, TIPFS_FD_SEGMENTS_MAX);
      for (uint32_t i = 0; i < n && !in->done(); ++i) {
        request->segments[i].offset = in->Extent(size);
        request->segments[i].length = in->Extent(size);
      }
    } else if (command == TIPFS_IOC_HINT_PATHS) {
      auto* request = reinterpret_cast<tipfs_hint_paths*>(buffer.data());
      uint32_t records = 0;
      size_t pos = 0;
      while (records < std::min<uint32_t>(header->count, 40) && !in->done()) {
        tipfs_path_record record{};
        const std::string& path = in->Pick(paths);
        record.offset = in->Extent(1 << 20);
        record.length = in->Extent(1 << 20);
        record.path_length = in->U8() % 16 != 0 ? static_cast<uint32_t>(path.size()) : in->U32();
        record.reserved = in->U8() % 32 == 0 ? 1 : 0;
        const size_t padded = (path.size() + 7) & ~size_t{7};
        if (pos + sizeof(record) + padded > TIPFS_PATH_RECORDS_BYTES) break;
        std::memcpy(request->records + pos, &record, sizeof(record));
        std::memcpy(request->records + pos + sizeof(record), path.data(), path.size());
        pos += sizeof(record) + padded;
        ++records;
      }
      if (in->U8() % 16 == 0) in->Fill(request->records + pos, in->U8());
      request->bytes = in->U8() % 8 != 0 ? static_cast<uint32_t>(pos) : in->U32();
      if (in->U8() % 8 != 0) header->count = records;
    } else if (command == TIPFS_IOC_CANCEL) {
      reinterpret_cast<tipfs_cancel*>(buffer.data())->flags = in->U8() % 5;
    } else if (command == TIPFS_IOC_SPEC_ATTACH || command == TIPFS_IOC_SPEC_DETACH) {
      auto* request = reinterpret_cast<tipfs_spec_attach*>(buffer.data());
      request->wait_for_data = in->U8() % 3;
      request->reserved = in->U8() % 16 == 0;
    } else {
      in->Fill(buffer.data() + sizeof(tipfs_hint_header), in->U8());
    }
    const fusefs::IoctlCaller caller = PickCaller(in);
    const size_t out_size = in->U8() % 8 != 0 ? sizeof(tipfs_query) : in->U8();
    std::string out;
    const void* argument = in->U8() % 32 == 0 ? nullptr : buffer.data();
    Status st =
        hints->Handle(caller, target, open_flags, command, argument, in_size, out_size, &out);
    ++calls;
    accepted += st.ok();
    static const std::set<int> kDocumented = {ENOTTY,  EPROTO,  EINVAL, EBADF,        ENOENT,
                                              ENOTDIR, EACCES,  EISDIR, ELOOP,        EPERM,
                                              EDQUOT,  ENOBUFS, EXDEV,  ENAMETOOLONG, ESRCH};
    if (!st.ok() && kDocumented.count(st.error()) == 0) {
      fail("ioctl " + std::to_string(command) +
           " failed with an undocumented errno: " + st.ToString());
    }
    if (st.ok() && command == TIPFS_IOC_QUERY && out.size() != sizeof(tipfs_query)) {
      fail("query reply of " + std::to_string(out.size()) + " bytes");
    }
    const uint64_t outstanding = cache()->Stats().outstanding_hinted_bytes;
    if (outstanding > kGlobalCap) {
      fail("outstanding hinted bytes " + std::to_string(outstanding) + " exceed the global cap");
    }
  }

  void Read(Bytes* in) {
    const uint64_t ino = AnyFile(in);
    auto inode = fs()->GetAttr(ino);
    const uint64_t offset = inode.ok() ? in->U32() % (inode->size + 1) : 0;
    std::string buffer(in->U32() % (512 * 1024) + 1, '\0');
    cache::ReadContext context = hints->ReadContextFor(in->Pick(pids));
    auto n = fs()->Read(context, ino, offset, buffer.size(), buffer.data());
    if (!n.ok() && n.error() != EAGAIN && n.error() != ENOENT) {
      fail("read failed: " + n.status().ToString());
    }
  }

  // Changes one of the readable files. Files stay within 1 MiB and replaced ones are removed,
  // so the in-memory disks (part of this process) stay small and memory growth means a leak.
  void Change(Bytes* in) {
    const size_t which = in->U8() % readable.size();
    const uint64_t ino = readable[which];
    switch (in->U8() % 3) {
      case 0: {  // write, possibly growing the file under its hints
        std::string data(in->U32() % (256 * 1024) + 1, 'w');
        (void)fs()->Write(ino, in->U32() % (768 * 1024), data.data(), data.size());
        break;
      }
      case 1: {  // truncate below or above its hints
        meta::AttrChange change;
        change.size = in->U32() % (1 << 20);
        change.now = meta::Time::Now();
        (void)fs()->SetAttr(ino, change);
        break;
      }
      default: {  // a new file in its place, the old one removed: hints of a removed inode
        const std::string name = "file" + std::to_string(serial++);
        const uint64_t fresh = MakeFile(meta::kRootIno, name, 0644, kCaller, in->U32() % 400'000);
        if (fresh == 0) break;
        (void)fs()->Unlink(names[which].first, names[which].second);
        (void)fs()->Forget(ino, 1);  // the setup's (or MakeFile's) lookup: the record may go
        readable[which] = fresh;
        names[which] = {meta::kRootIno, name};
        break;
      }
    }
  }

  void Control(Bytes* in) {
    static const std::vector<std::string> kSpecs = {"hdd",
                                                    "ssd",
                                                    "none",
                                                    "L=5ms",
                                                    "slowdown=2",
                                                    "hdd,L=1ms,o=10us,g=0,G=1ns",
                                                    "",
                                                    "bogus",
                                                    "L=-1",
                                                    "slowdown=1e308",
                                                    "G=",
                                                    "hdd,,,",
                                                    std::string(5000, 'x'),
                                                    "nvme\n"};
    const uint64_t model = control.Lookup("disk-model");
    std::string text = in->Pick(kSpecs);
    if (in->U8() % 4 == 0) {
      text.resize(in->U8());
      in->Fill(text.data(), text.size());
    }
    Status st = control.Write(model, text);
    if (!st.ok() && st.error() != EINVAL) fail("disk-model write: " + st.ToString());
    Status refused = control.Write(control.Lookup("stats"), text);
    if (refused.error() != EACCES) fail("a read-only control file took a write");
    std::string name(in->U8() % 12, '\0');
    in->Fill(name.data(), name.size());
    const uint64_t found = control.Lookup(name);
    if (found != 0 && !control.Render(found).ok()) fail("control file " + name + " did not render");
    (void)control.Render(fusefs::ControlFiles::kDirIno + 1 + in->U8());
    for (const auto& [file, ino] : control.List()) {
      auto text_or = control.Render(ino);
      if (!text_or.ok()) fail("control file " + file + ": " + text_or.status().ToString());
    }
  }
};

HintFuzzer::HintFuzzer(std::function<void(const std::string&)> fail)
    : state_(std::make_unique<State>()) {
  state_->fail = std::move(fail);
  state_->Setup();
}

HintFuzzer::~HintFuzzer() {
  if (state_->hints) {
    state_->cache()->CancelProcess(static_cast<uint32_t>(getpid()));
  }
}

uint64_t HintFuzzer::calls() const { return state_->calls; }
uint64_t HintFuzzer::accepted() const { return state_->accepted; }

void HintFuzzer::RunOne(const uint8_t* data, size_t size) {
  if (!state_->hints) return;
  Bytes in(data, size);
  for (int step = 0; step < 64 && !in.done(); ++step) {
    switch (in.U8() % 10) {
      case 0:
        state_->Read(&in);
        break;
      case 1:
        state_->Change(&in);
        break;
      case 2:
        state_->Control(&in);
        break;
      default:
        state_->Ioctl(&in);
        break;
    }
  }
}

void HintFuzzer::CheckInvariants() {
  State& s = *state_;
  if (!s.hints) return;
  const cache::CacheStats stats = s.cache()->Stats();
  if (stats.outstanding_hinted_bytes > kGlobalCap) s.fail("global hint cap exceeded");
  for (uint64_t ino : s.secret) {
    for (uint64_t block = 0; block < 16; ++block) {
      if (s.cache()->Contains(ino, block)) {
        s.fail("block " + std::to_string(block) + " of unreadable inode " + std::to_string(ino) +
               " was fetched for a hint");
        return;
      }
    }
  }
  const uint64_t rss = ResidentBytes();
  if (rss > s.baseline_rss + kMaxGrowthBytes) {
    s.fail("resident memory grew by " + std::to_string((rss - s.baseline_rss) >> 20) + " MiB");
  }
}

}  // namespace tipfs::testing
