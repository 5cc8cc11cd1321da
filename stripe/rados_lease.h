// RadosLease: one mount at a time owns a volume whose disks are RADOS pools. The metadata of a
// volume lives in one host's local RocksDB, so a second mount (from another host, or another
// process here) writing the same objects would corrupt files. Each RADOS disk's label object
// therefore carries an exclusive advisory lock (librados cls_lock "tipfs-mount") with a lease:
// it expires unless renewed, so a host that died releases the volume after one lease period.
//
// States: acquired -> renewed every lease/3 by the lease's own thread -> released at unmount.
// A renewal that finds another holder (EBUSY) loses the lease for good: the disk then fails
// every write with EIO rather than race the new owner. A renewal that cannot reach the cluster
// retries; once no renewal has succeeded for a whole lease period, writes fail with EIO until one
// succeeds again (by then another mount may have taken the volume; the renewal finds out).
//
// The lock's cookie says who holds it ("tipfs:HOST:PID:NONCE"), so a refusal names the host and
// process, and a mount on the same host may break the lock of a tipfs process that no longer
// exists (killed, power lost) instead of waiting for its lease to run out.
//
// Thread-safety: valid() and lost() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "stripe/rados_cluster.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tipfs::stripe {

struct RadosLeaseOptions {
  int64_t lease_ns = int64_t{30} * 1000 * 1000 * 1000;
  std::string object = "tipfs-label";
};

// Who holds the lock of `object`, parsed from its cookie.
struct RadosLockHolder {
  std::string client;  // "client.4134"
  std::string cookie;
  std::string host;  // empty when the cookie is not tipfs's
  int64_t pid = 0;
  std::string Describe() const;  // "tipfs pid 123 on host h1 (client.4134)"
};

// The holders of tipfs's lock on `object` (empty when unlocked or missing).
Result<std::vector<RadosLockHolder>> ListLockHolders(const RadosNamespace& ns,
                                                     const std::string& object);

class RadosLease {
 public:
  // Takes the lock, breaking one left by a dead tipfs process of this host. EBUSY names the
  // holder ("... is mounted by tipfs pid 123 on host h1"). REQUIRES: `ns` outlives the lease.
  static Result<std::unique_ptr<RadosLease>> Acquire(const RadosNamespace* ns,
                                                     RadosLeaseOptions options = {});
  // Stops renewing and unlocks (best effort: an unreachable cluster lets the lease expire).
  ~RadosLease();
  RadosLease(const RadosLease&) = delete;
  RadosLease& operator=(const RadosLease&) = delete;

  // True while writes are safe: held, and renewed within the last lease period.
  bool valid() const;
  // Another mount took the lock.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  const std::string& cookie() const { return cookie_; }
  // For tests: a process that dies keeps no renewal going and unlocks nothing.
  void AbandonForTest();

 private:
  RadosLease(const RadosNamespace* ns, RadosLeaseOptions options, std::string cookie);
  int Lock(bool renew) const;
  void RenewLoop();
  int64_t NowNanos() const;

  const RadosNamespace* const ns_;
  const RadosLeaseOptions options_;
  const std::string cookie_;

  std::atomic<bool> lost_{false};
  std::atomic<int64_t> renewed_at_ns_{0};  // steady clock of the last success

  Mutex mu_;
  CondVar wake_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool abandoned_ GUARDED_BY(mu_) = false;
  std::thread renewer_;
};

}  // namespace tipfs::stripe
