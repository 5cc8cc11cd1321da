// `tipfs mkfs`: labels the disks and creates the metadata store, private to its owner.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "fusefs/daemon.h"
#include "meta/meta_store.h"
#include "stripe/layout.h"
#include "stripe/volume.h"
#include "util/units.h"

namespace tipfs::cli {
namespace {

struct MkfsArgs {
  std::vector<std::string> disks;
  std::string stripe_unit = "64K";
  bool force = false;
};

int RunMkfs(const MkfsArgs& args) {
  stripe::MkfsOptions options;
  options.disks = args.disks;
  options.force = args.force;
  Result<uint64_t> unit = ParseSize(args.stripe_unit);
  if (!unit.ok()) return Fail("mkfs", unit.status().WithContext("--stripe-unit"));
  if (*unit > UINT32_MAX) {
    return Fail("mkfs",
                Status::InvalidArgument("--stripe-unit " + args.stripe_unit + " is too large"));
  }
  options.stripe_unit = static_cast<uint32_t>(*unit);

  Result<stripe::Label> label = stripe::Mkfs(options);
  if (!label.ok()) return Fail("mkfs", label.status());
  const mode_t old_umask = umask(077);  // the store's files hold names: its owner's only
  Result<std::unique_ptr<meta::MetaStore>> store =
      meta::MetaStore::Create(stripe::MetaPath(*label), label->volume_uuid, getuid(), getgid());
  umask(old_umask);
  if (!store.ok()) return Fail("mkfs", store.status());
  store->reset();  // closed: every file it made is there to be made private
  Status private_modes = fusefs::MakeVolumePrivate(*label);
  if (!private_modes.ok()) return Fail("mkfs", private_modes);
  std::printf("tipfs: created volume %s: %zu disk%s, stripe unit %s\n", label->volume_uuid.c_str(),
              label->disk_paths.size(), label->disk_paths.size() == 1 ? "" : "s",
              FormatSize(label->stripe_unit).c_str());
  return 0;
}

}  // namespace

Runner AddMkfsCommand(CLI::App* app) {
  auto args = std::make_shared<MkfsArgs>();
  app->add_option("--stripe-unit", args->stripe_unit,
                  "Bytes per stripe unit: a power of two, at least 4K (default 64K)")
      ->option_text("SIZE")
      ->check(SizeValidator());
  app->add_flag("--force", args->force,
                "Overwrite an existing tipfs volume, or use directories that hold other files");
  app->add_option("DISK", args->disks, "Backing directories, 1 to 64, in disk order")
      ->required()
      ->expected(1, static_cast<int>(stripe::Layout::kMaxDisks));
  return [args] { return RunMkfs(*args); };
}

}  // namespace tipfs::cli
