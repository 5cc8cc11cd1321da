// MetricsServer: /metrics over HTTP for Prometheus (`tipfs mount --metrics-listen [ADDR:]PORT`),
// beside the .tipfs/metrics control file. A plain HTTP/1.1 server on one thread: each connection
// gets one response (Connection: close) rendered on the spot; GET or HEAD of /metrics is 200 with
// the text exposition format, any other path 404, any other method 405. The address defaults to
// 127.0.0.1: the counters name nothing secret, but nothing need listen beyond the machine unless
// asked. A slow or silent client is dropped after a few seconds, so it cannot stall the next.
//
// Thread-safety: Start and Stop from one thread; the renderer runs on the server's thread.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "util/status.h"

namespace tipfs::fusefs {

class MetricsServer {
 public:
  using Renderer = std::function<std::string()>;

  MetricsServer() = default;
  ~MetricsServer() { Stop(); }
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds `listen` ("9100", ":9100", "127.0.0.1:9100", "[::1]:9100", "0.0.0.0:9100") and starts
  // serving. Errors name the address: a bad one is EINVAL, a taken port EADDRINUSE.
  Status Start(const std::string& listen, Renderer render);
  void Stop();
  // The port bound (useful with port 0).
  int port() const { return port_; }

 private:
  void Serve();
  void Answer(int fd);

  Renderer render_;
  int listen_fd_ = -1;
  int stop_fds_[2] = {-1, -1};  // a pipe: writing to it ends Serve
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tipfs::fusefs
