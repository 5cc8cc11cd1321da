#include "stripe/backing_io.h"

namespace tipfs::stripe {

namespace {

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string FormatBackingIo(const std::vector<Disk*>& disks) {
  std::string out;
  for (size_t d = 0; d < disks.size(); ++d) {
    const BackingIoInfo info = disks[d]->BackingIo();
    if (info.mode.empty()) continue;
    out += "backing I/O: disk " + std::to_string(d) + " " + info.mode + ", " +
           std::to_string(info.direct_reads) + " direct reads, " +
           std::to_string(info.buffered_reads) + " buffered\n";
  }
  return out;
}

std::string BackingIoJsonMember(const std::vector<Disk*>& disks) {
  std::string out = "\"backing_io\":[";
  for (size_t d = 0; d < disks.size(); ++d) {
    const BackingIoInfo info = disks[d]->BackingIo();
    if (d > 0) out += ",";
    out += "{\"disk\":" + std::to_string(d) + ",\"mode\":" + Quoted(info.mode) +
           ",\"direct_reads\":" + std::to_string(info.direct_reads) +
           ",\"buffered_reads\":" + std::to_string(info.buffered_reads) + "}";
  }
  return out + "]";
}

void AppendBackingIoPrometheus(std::string* out, const std::vector<Disk*>& disks) {
  *out +=
      "# HELP tipfs_backing_reads_total Reads of the backing objects, by whether they bypassed "
      "the backing file system's page cache (O_DIRECT)\n"
      "# TYPE tipfs_backing_reads_total counter\n";
  for (size_t d = 0; d < disks.size(); ++d) {
    const BackingIoInfo info = disks[d]->BackingIo();
    const std::string disk = std::to_string(d);
    *out += "tipfs_backing_reads_total{disk=\"" + disk + "\",path=\"direct\"} " +
            std::to_string(info.direct_reads) + "\n";
    *out += "tipfs_backing_reads_total{disk=\"" + disk + "\",path=\"buffered\"} " +
            std::to_string(info.buffered_reads) + "\n";
  }
}

}  // namespace tipfs::stripe
