// Real programs inside the mount give the same results as in a native directory: git (same
// commit and tree hashes with fixed author/date), tar x of a tarball with many files (same tree,
// and the same bytes when archived again), cp -a (same tree with times, modes, links, xattrs),
// sha256sum over many files, and a C program compiled (gcc -c, link, make) and run. Each test
// runs the same shell script in both places and compares what the programs printed and the trees
// they left. Both data cache modes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

class RealProgramsTest : public DataCacheModeTest {
 protected:
  void SetUp() override {
    MountedTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    native_ = mount_->native() + "/work";
    mounted_ = Path("work");
    ASSERT_EQ(mkdir(native_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(mounted_.c_str(), 0755), 0) << ErrnoName(errno);
    home_ = mount_->root() + "/home";
    std::filesystem::create_directories(home_);
  }

  // Environment that makes git deterministic and independent of the user's configuration.
  std::string GitEnvironment() const {
    return "export HOME=" + ShellQuote(home_) +
           " GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=t@example.org"
           " GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=t@example.org"
           " GIT_AUTHOR_DATE='2020-01-02T03:04:05+0000'"
           " GIT_COMMITTER_DATE='2020-01-02T03:04:05+0000' TZ=UTC LC_ALL=C; ";
  }

  // Runs `script` with /bin/sh in `dir`; fails the test when it exits non-zero.
  std::string Run(const std::string& dir, const std::string& script) {
    CommandResult result = RunSplit("set -e; cd " + ShellQuote(dir) + "; " + script);
    EXPECT_EQ(result.exit_code, 0) << "in " << dir << ":\n" << script << "\nstderr: " << result.err;
    return result.out;
  }

  // Runs the same script in the native directory and on the mount; their stdout must agree.
  std::string RunBoth(const std::string& script) {
    const std::string native = Run(native_, script);
    const std::string mounted = Run(mounted_, script);
    EXPECT_EQ(native, mounted) << "the script printed different things:\n" << script;
    return mounted;
  }

  void ExpectSameTree(const std::string& rel, const SnapshotOptions& options) {
    const auto native = SnapshotTree(native_ + "/" + rel, options);
    const auto mounted = SnapshotTree(mounted_ + "/" + rel, options);
    EXPECT_GT(native.size(), 0u);
    EXPECT_EQ(native, mounted) << rel << ":\n" << DiffLines(native, mounted);
  }

  // A tree on the native file system to archive: many small files (640) in nested directories,
  // a few large ones, symlinks, hard links, odd modes and fixed times.
  std::string MakeTarball() {
    const std::string source = mount_->root() + "/tarsrc";
    const std::string tarball = mount_->root() + "/tree.tar";
    std::filesystem::create_directories(source);
    // Not more files than that: every test's tree is deleted again, and on this machine's root
    // file system (mounted with `discard`) each unlink costs milliseconds.
    for (int d = 0; d < 20; ++d) {
      const std::string dir = source + "/dir" + std::to_string(d) + "/sub" + std::to_string(d % 3);
      std::filesystem::create_directories(dir);
      for (int f = 0; f < 32; ++f) {
        // Mostly small files; one in 60 spans a few stripe units.
        const size_t size = (d * 32 + f) % 40 == 0 ? 200000 + f : (d * 131 + f * 17) % 5000;
        EXPECT_TRUE(
            WriteFileBytes(dir + "/file" + std::to_string(f), PatternBytes(size, d * 100 + f)));
      }
    }
    EXPECT_TRUE(WriteFileBytes(source + "/large", PatternBytes(3 << 20, 7)));
    chmod((source + "/large").c_str(), 0600);
    chmod((source + "/dir1/sub1/file1").c_str(), 04755);
    chmod((source + "/dir2").c_str(), 01777);
    symlink("dir1/sub1/file2", (source + "/link_rel").c_str());
    symlink("/nonexistent/target", (source + "/link_dangling").c_str());
    link((source + "/dir3/sub0/file3").c_str(), (source + "/hardlink").c_str());
    mkfifo((source + "/fifo").c_str(), 0644);
    std::string out;
    EXPECT_EQ(RunCommand("cd " + ShellQuote(source) +
                             " && find . -exec touch -h -d '2019-05-06 07:08:09.123456789' {} + && "
                             "tar --sort=name -cf " +
                             ShellQuote(tarball) + " .",
                         &out),
              0)
        << out;
    return tarball;
  }

  std::string native_, mounted_, home_;
};

TEST_P(RealProgramsTest, GitInitAddCommit) {
  const std::string script = GitEnvironment() + R"(
    git -c init.defaultBranch=main init -q repo
    cd repo
    mkdir -p src docs
    seq 1 20000 > src/numbers.txt
    for i in $(seq 1 60); do printf 'file %s\nline two\n' "$i" > src/f$i.txt; done
    printf '#!/bin/sh\necho hi\n' > run.sh && chmod 755 run.sh
    ln -s src/f1.txt link
    head -c 300000 src/numbers.txt > docs/big.txt
    git add -A
    git commit -q -m first
    git mv src/f2.txt docs/moved.txt
    git rm -q src/f3.txt
    echo changed >> src/f4.txt
    git commit -q -am second
    git log --format='%H %T %s'
    git status --porcelain
    git fsck --strict --no-progress
    git gc -q
    git fsck --strict --no-progress
    git log --format=%T
    git cat-file -p HEAD:src/f4.txt
    git checkout -q HEAD~1 -- src/f3.txt
    git diff --cached --stat
  )";
  const std::string out = RunBoth(script);
  EXPECT_NE(out.find("second"), std::string::npos) << out;
}

TEST_P(RealProgramsTest, TarExtractAndArchiveAgain) {
  const std::string tarball = MakeTarball();
  RunBoth("mkdir x && tar -xf " + ShellQuote(tarball) + " -C x && echo extracted");
  SnapshotOptions options;  // names, types, modes, owners, sizes, mtimes, targets, contents, links
  options.xattrs = false;
  ExpectSameTree("x", options);
  // Archived again from each side: the same bytes (GNU format stores no inode numbers or ctimes).
  RunBoth("tar --sort=name --format=gnu -cf - -C x . | sha256sum");
  RunBoth("tar -tvf " + ShellQuote(tarball) + " | wc -l; tar -df " + ShellQuote(tarball) +
          " -C x && echo no differences");
}

TEST_P(RealProgramsTest, CopyTreeWithCpA) {
  const std::string tarball = MakeTarball();
  RunBoth("mkdir x && tar -xf " + ShellQuote(tarball) + " -C x");
  // xattrs to be preserved.
  RunBoth("setfattr -n user.color -v blue x/dir1/sub1/file1 && setfattr -n user.empty x/dir4");
  RunBoth("cp -a x y && echo copied");
  SnapshotOptions options;
  ExpectSameTree("y", options);
  // Within the mount, the copy equals its source (times to the nanosecond, xattrs, links).
  const auto source = SnapshotTree(mounted_ + "/x", options);
  const auto copy = SnapshotTree(mounted_ + "/y", options);
  EXPECT_EQ(source, copy) << DiffLines(source, copy);
  // Across file systems: native tree copied into the mount.
  Run(mounted_, "cp -a " + ShellQuote(native_ + "/x") + " from_native");
  const auto native_source = SnapshotTree(native_ + "/x", options);
  const auto imported = SnapshotTree(mounted_ + "/from_native", options);
  EXPECT_EQ(native_source, imported) << DiffLines(native_source, imported);
}

TEST_P(RealProgramsTest, Sha256sumOverManyFiles) {
  const std::string tarball = MakeTarball();
  RunBoth("mkdir x && tar -xf " + ShellQuote(tarball) + " -C x");
  const std::string sums = RunBoth("cd x && find . -type f -print0 | sort -z | xargs -0 sha256sum");
  EXPECT_GT(std::count(sums.begin(), sums.end(), '\n'), 600);
  // Checked against the list, from the other side too.
  EXPECT_TRUE(WriteFileBytes(mount_->root() + "/sums", sums));
  RunBoth("cd x && sha256sum --quiet -c " + ShellQuote(mount_->root() + "/sums") + " && echo ok");
}

TEST_P(RealProgramsTest, CompileLinkAndRunACProgram) {
  const std::string script = R"(
    cat > util.h <<'EOF'
#include <stddef.h>
unsigned long checksum(const unsigned char* data, size_t n);
extern const int table[256];
EOF
    cat > util.c <<'EOF'
#include "util.h"
unsigned long checksum(const unsigned char* data, size_t n) {
  unsigned long h = 5381;
  for (size_t i = 0; i < n; ++i) h = h * 33 + data[i] + table[data[i]];
  return h;
}
EOF
    { echo '#include "util.h"'; echo 'const int table[256] = {';
      for i in $(seq 0 255); do printf '%d,' $((i * 7919 % 1009)); done; echo '};'; } > table.c
    cat > main.c <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "util.h"
int main(void) {
  enum { N = 3 << 20 };
  unsigned char* buf = malloc(N);
  for (int i = 0; i < N; ++i) buf[i] = (unsigned char)(i * 2654435761u >> 13);
  FILE* f = fopen("result.bin", "wb");
  if (!f || fwrite(buf, 1, N, f) != N || fclose(f) != 0) { perror("write"); return 1; }
  int fd = open("result.bin", O_RDONLY);
  unsigned char* map = mmap(NULL, N, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) { perror("mmap"); return 1; }
  printf("written %lu\nmapped  %lu\n", checksum(buf, N), checksum(map, N));
  munmap(map, N);
  close(fd);
  return 0;
}
EOF
    gcc -O2 -Wall -c main.c util.c table.c
    gcc -o prog main.o util.o table.o
    ./prog
    sha256sum main.o util.o table.o result.bin
    cat > Makefile <<'EOF'
prog2: main.o util.o table.o
	gcc -o $@ $^
%.o: %.c util.h
	gcc -O2 -c $<
EOF
    make -s prog2 && ./prog2 | head -1
    touch -d '2000-01-01' main.o util.o table.o prog2
    make -s prog2 2>&1 | wc -l
    ls -l --time-style=+ prog2 | cut -d' ' -f1,5
  )";
  const std::string out = RunBoth(script);
  EXPECT_NE(out.find("written"), std::string::npos) << out;
}

// Shared writable mmap (MAP_SHARED): kernel mode supports it; direct mode refuses it (DESIGN.md,
// libfuse 3.14 has no FUSE_DIRECT_IO_ALLOW_MMAP), and private mappings work in both.
TEST_P(RealProgramsTest, MemoryMappedFiles) {
  const std::string path = mounted_ + "/mapped";
  const size_t size = 300000;
  ASSERT_TRUE(WriteFileBytes(path, PatternBytes(size, 5)));
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* priv = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(priv, MAP_FAILED) << ErrnoName(errno);
  EXPECT_EQ(std::string(static_cast<char*>(priv), size), PatternBytes(size, 5));
  munmap(priv, size);
  void* shared = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (IsDirectMode(GetParam())) {
    EXPECT_EQ(shared, MAP_FAILED) << "direct mode was not expected to map shared";
    if (shared != MAP_FAILED) munmap(shared, size);
    close(fd);
    return;
  }
  ASSERT_NE(shared, MAP_FAILED) << ErrnoName(errno);
  std::memcpy(static_cast<char*>(shared) + 70000, "through the mapping", 19);
  EXPECT_EQ(msync(shared, size, MS_SYNC), 0) << ErrnoName(errno);
  munmap(shared, size);
  close(fd);
  std::string expected = PatternBytes(size, 5);
  expected.replace(70000, 19, "through the mapping");
  EXPECT_EQ(ReadFileOrDie(path), expected);
  ASSERT_EQ(UnmountRetryingWhileBusy(*mount_), "");
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(path), expected) << "mapped writes lost at remount";
}

INSTANTIATE_TEST_SUITE_P(DataCache, RealProgramsTest, ::testing::ValuesIn(AllDataCacheModes()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing
