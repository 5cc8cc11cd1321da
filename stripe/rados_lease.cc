// RadosLease; see rados_lease.h for the states and the cookie.
#include "stripe/rados_lease.h"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace tipfs::stripe {

namespace {

constexpr char kLockName[] = "tipfs-mount";
constexpr char kCookiePrefix[] = "tipfs:";

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

std::vector<std::string> SplitNul(const std::string& buffer, size_t used) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < used && start < buffer.size()) {
    const size_t end = buffer.find('\0', start);
    out.push_back(buffer.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

RadosLockHolder ParseHolder(std::string client, std::string cookie) {
  RadosLockHolder h;
  h.client = std::move(client);
  h.cookie = std::move(cookie);
  if (h.cookie.rfind(kCookiePrefix, 0) != 0) return h;
  const std::string rest = h.cookie.substr(sizeof(kCookiePrefix) - 1);
  const size_t a = rest.find(':');
  const size_t b = a == std::string::npos ? a : rest.find(':', a + 1);
  if (b == std::string::npos) return h;
  h.host = rest.substr(0, a);
  h.pid = std::strtoll(rest.substr(a + 1, b - a - 1).c_str(), nullptr, 10);
  return h;
}

// A dead process: no such pid, or one that is only a zombie waiting for its parent.
bool ProcessIsGone(int64_t pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "re");
  if (f == nullptr) return false;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  const char* state = read ? std::strrchr(line, ')') : nullptr;  // "pid (comm) S ..."
  return state != nullptr && (state[2] == 'Z' || state[2] == 'X');
}

}  // namespace

std::string RadosLockHolder::Describe() const {
  if (host.empty()) return client + " (cookie " + cookie + ")";
  return "tipfs pid " + std::to_string(pid) + " on host " + host + " (" + client + ")";
}

Result<std::vector<RadosLockHolder>> ListLockHolders(const RadosNamespace& ns,
                                                     const std::string& object) {
  size_t sizes[4] = {256, 1024, 1024, 1024};
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string tag(sizes[0], '\0'), clients(sizes[1], '\0'), cookies(sizes[2], '\0'),
        addrs(sizes[3], '\0');
    int exclusive = 0;
    const ssize_t n = rados_list_lockers(ns.ioctx(), object.c_str(), kLockName, &exclusive,
                                         tag.data(), &sizes[0], clients.data(), &sizes[1],
                                         cookies.data(), &sizes[2], addrs.data(), &sizes[3]);
    if (n == -ERANGE) continue;  // the sizes now say what is needed
    if (n == -ENOENT) return std::vector<RadosLockHolder>();
    if (n < 0)
      return ns.Error(ns.display() + ": list the lockers of " + object, static_cast<int>(n));
    std::vector<std::string> c = SplitNul(clients, sizes[1]);
    std::vector<std::string> k = SplitNul(cookies, sizes[2]);
    std::vector<RadosLockHolder> holders;
    for (size_t i = 0; i < static_cast<size_t>(n) && i < c.size() && i < k.size(); ++i) {
      holders.push_back(ParseHolder(c[i], k[i]));
    }
    return holders;
  }
  return Status::IOError(ns.display() + ": list the lockers of " + object + ": too many");
}

RadosLease::RadosLease(const RadosNamespace* ns, RadosLeaseOptions options, std::string cookie)
    : ns_(ns), options_(std::move(options)), cookie_(std::move(cookie)) {}

int64_t RadosLease::NowNanos() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int RadosLease::Lock(bool renew) const {
  struct timeval duration;
  duration.tv_sec = static_cast<time_t>(options_.lease_ns / 1000000000);
  duration.tv_usec = static_cast<suseconds_t>(options_.lease_ns % 1000000000 / 1000);
  const std::string description = "tipfs mount (" + cookie_ + ")";
  return rados_lock_exclusive(ns_->ioctx(), options_.object.c_str(), kLockName, cookie_.c_str(),
                              description.c_str(), &duration,
                              renew ? LIBRADOS_LOCK_FLAG_MAY_RENEW : 0);
}

Result<std::unique_ptr<RadosLease>> RadosLease::Acquire(const RadosNamespace* ns,
                                                        RadosLeaseOptions options) {
  std::random_device random;
  char nonce[20];
  std::snprintf(nonce, sizeof(nonce), "%08x", static_cast<unsigned>(random()));
  const std::string host = HostName();
  const std::string cookie =
      std::string(kCookiePrefix) + host + ":" + std::to_string(getpid()) + ":" + nonce;
  auto lease = std::unique_ptr<RadosLease>(new RadosLease(ns, std::move(options), cookie));
  const std::string& object = lease->options_.object;
  int rc = lease->Lock(false);
  if (rc == -EBUSY) {
    Result<std::vector<RadosLockHolder>> holders = ListLockHolders(*ns, object);
    if (!holders.ok()) return holders.status();
    for (const RadosLockHolder& h : *holders) {
      if (h.host != host || !ProcessIsGone(h.pid)) {
        return Status::Busy(ns->display() + " is mounted by " + h.Describe() +
                            "; one mount at a time owns a volume (its lease runs out " +
                            std::to_string(lease->options_.lease_ns / 1000000000) +
                            " s after that mount stops renewing it)");
      }
      // A tipfs of this host that died without unlocking: its lease need not run out.
      const int broken = rados_break_lock(ns->ioctx(), object.c_str(), kLockName, h.client.c_str(),
                                          h.cookie.c_str());
      if (broken < 0 && broken != -ENOENT) {
        return ns->Error(ns->display() + ": break the stale lock of " + h.Describe(), broken);
      }
    }
    rc = lease->Lock(false);
  }
  if (rc == -EBUSY) return Status::Busy(ns->display() + " is mounted elsewhere (locked)");
  if (rc < 0) return ns->Error(ns->display() + ": lock " + object, rc);
  lease->renewed_at_ns_.store(lease->NowNanos(), std::memory_order_release);
  lease->renewer_ = std::thread([l = lease.get()] { l->RenewLoop(); });
  return lease;
}

void RadosLease::RenewLoop() {
  const auto period = std::chrono::nanoseconds(options_.lease_ns / 3);
  MutexLock lock(&mu_);
  while (!stopping_) {
    const auto deadline = std::chrono::steady_clock::now() + period;
    while (!stopping_ && wake_.WaitUntil(&mu_, deadline)) {
    }
    if (stopping_) break;
    lock.Unlock();
    const int rc = Lock(true);
    if (rc == 0) {
      renewed_at_ns_.store(NowNanos(), std::memory_order_release);
    } else if (rc == -EBUSY && !lost_.exchange(true, std::memory_order_acq_rel)) {
      std::fprintf(stderr,
                   "tipfs: %s: lost the lease: another mount took the volume; writes fail "
                   "from now on\n",
                   ns_->display().c_str());
    }
    lock.Lock();
    if (lost_.load(std::memory_order_acquire)) break;
  }
}

bool RadosLease::valid() const {
  if (lost()) return false;
  return NowNanos() - renewed_at_ns_.load(std::memory_order_acquire) < options_.lease_ns;
}

void RadosLease::AbandonForTest() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    abandoned_ = true;
  }
  wake_.SignalAll();
  if (renewer_.joinable()) renewer_.join();
}

RadosLease::~RadosLease() {
  bool abandoned;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    abandoned = abandoned_;
  }
  wake_.SignalAll();
  if (renewer_.joinable()) renewer_.join();
  if (!abandoned && !lost()) {
    (void)rados_unlock(ns_->ioctx(), options_.object.c_str(), kLockName, cookie_.c_str());
  }
}

}  // namespace tipfs::stripe
