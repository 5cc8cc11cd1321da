#include "fusefs/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace tipfs::fusefs {
namespace {

// "[ADDR:]PORT" or "[V6ADDR]:PORT" into host and port; host defaults to loopback.
bool SplitListen(const std::string& listen, std::string* host, std::string* port) {
  *host = "127.0.0.1";
  size_t colon = listen.rfind(':');
  if (!listen.empty() && listen[0] == '[') {
    const size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return false;
    }
    *host = listen.substr(1, close - 1);
    colon = close + 1;
  } else if (colon != std::string::npos && colon > 0) {
    *host = listen.substr(0, colon);
  }
  *port = colon == std::string::npos ? listen : listen.substr(colon + 1);
  if (port->empty() || port->find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoul(*port) <= 65535;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status MetricsServer::Start(const std::string& listen, Renderer render) {
  std::string host, port;
  if (!SplitListen(listen, &host, &port)) {
    return Status::InvalidArgument("--metrics-listen " + listen +
                                   ": expected [ADDRESS:]PORT, e.g. 9100 or 127.0.0.1:9100");
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return Status::InvalidArgument("--metrics-listen " + listen + ": " + host +
                                   " is not a numeric IPv4 or IPv6 address");
  }
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  Status st;
  if (fd < 0) {
    st = ErrnoStatus("--metrics-listen " + listen + ": socket");
  } else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
             bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
    st = ErrnoStatus("--metrics-listen " + listen);
  }
  freeaddrinfo(found);
  if (!st.ok()) {
    if (fd >= 0) close(fd);
    return st;
  }
  sockaddr_storage bound = {};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (pipe2(stop_fds_, O_CLOEXEC) != 0) {
    close(fd);
    return ErrnoStatus("--metrics-listen: pipe");
  }
  listen_fd_ = fd;
  render_ = std::move(render);
  thread_ = std::thread([this] { Serve(); });
  return Status::OK();
}

void MetricsServer::Stop() {
  if (!thread_.joinable()) return;
  (void)!write(stop_fds_[1], "x", 1);
  thread_.join();
  close(listen_fd_);
  close(stop_fds_[0]);
  close(stop_fds_[1]);
  listen_fd_ = -1;
}

void MetricsServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fds_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents & POLLIN) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      Answer(client);
      close(client);
    }
  }
}

void MetricsServer::Answer(int fd) {
  // Read the request head (up to the blank line), for at most a few seconds.
  std::string request;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    char buffer[2048];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  const size_t space = line.find(' ');
  const std::string method = line.substr(0, space);
  std::string path = space == std::string::npos ? "" : line.substr(space + 1);
  path = path.substr(0, path.find(' '));
  path = path.substr(0, path.find('?'));
  std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (method != "GET" && method != "HEAD") {
    status = "405 Method Not Allowed";
    type = "text/plain";
    body = "only GET and HEAD\n";
  } else if (path != "/metrics") {
    status = "404 Not Found";
    type = "text/plain";
    body = "tipfs serves /metrics\n";
  } else {
    body = render_();
  }
  std::string head = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                     "\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\nConnection: close\r\n\r\n";
  if (SendAll(fd, head) && method != "HEAD") SendAll(fd, body);
}

}  // namespace tipfs::fusefs
