// `tipfs mkfs`: labels the disks and creates the metadata store, private to its owner.
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "fusefs/daemon.h"
#include "meta/meta_store.h"
#include "stripe/layout.h"
#include "stripe/mkfs.h"
#include "util/units.h"

namespace tipfs::cli {
namespace {

struct MkfsArgs {
  std::vector<std::string> disks;
  std::string stripe_unit = "64K";
  std::string meta_dir;
  std::string rados_object_size = "4M";
  bool force = false;
};

Result<uint32_t> ParseSize32(const std::string& option, const std::string& text) {
  Result<uint64_t> size = ParseSize(text);
  if (!size.ok()) return size.status().WithContext(option);
  if (*size > UINT32_MAX) return Status::InvalidArgument(option + " " + text + " is too large");
  return static_cast<uint32_t>(*size);
}

int RunMkfs(const MkfsArgs& args) {
  stripe::MkfsOptions options;
  options.disks = args.disks;
  options.force = args.force;
  options.meta_dir = args.meta_dir;
  Result<uint32_t> unit = ParseSize32("--stripe-unit", args.stripe_unit);
  if (!unit.ok()) return Fail("mkfs", unit.status());
  options.stripe_unit = *unit;
  Result<uint32_t> object_size = ParseSize32("--rados-object-size", args.rados_object_size);
  if (!object_size.ok()) return Fail("mkfs", object_size.status());
  options.rados_object_size = *object_size;

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
              label->disk_names.size(), label->disk_names.size() == 1 ? "" : "s",
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
  app->add_option("--meta", args->meta_dir,
                  "Local directory for the metadata store (default: the first directory disk; "
                  "needed when every disk is a RADOS pool)")
      ->option_text("DIR");
  app->add_option("--rados-object-size", args->rados_object_size,
                  "Bytes per RADOS object of a file's data: a power of two, 4K to 128M "
                  "(default 4M)")
      ->check(SizeValidator());
  app->add_flag("--force", args->force,
                "Overwrite an existing tipfs volume, or use directories that hold other files");
  app->add_option("DISK", args->disks,
                  "Backing directories or rados:POOL[/NAMESPACE][?conf=PATH&id=CLIENT], 1 to 64, "
                  "in disk order")
      ->required()
      ->expected(1, static_cast<int>(stripe::Layout::kMaxDisks));
  return [args] { return RunMkfs(*args); };
}

}  // namespace tipfs::cli
