// librados, loaded when a RADOS disk is first opened instead of when tipfs starts.
//
// Linking librados made every tipfs process (`tipfs run`, `tipfs --version`, `tipfs stats`) map
// libceph-common and its 15 dependencies and resolve their symbols: about 12 ms of CPU per
// process before main(), on a volume of directories that never talks to Ceph. tipfs_stripe
// therefore does not link librados; rados_library.cc defines each librados function tipfs
// calls, with librados.h's own prototype, as a forwarder to librados.so.2 opened with dlopen
// on first use. Code keeps calling rados_read() & co. as documented by Ceph.
//
// A librados function not forwarded yet is an undefined reference at link time: add it to the
// list in rados_library.cc. Thread-safety: LoadRadosLibrary and the forwarders may be called
// from any thread.
#pragma once

#include "util/status.h"

namespace tipfs::stripe {

// Opens librados.so.2 and resolves every forwarded function, once; later calls return the first
// call's result. An error says what to install. RadosCluster::Connect calls it before anything
// else, so a forwarder reached without it (a bug) aborts loudly instead of returning garbage.
Status LoadRadosLibrary();

}  // namespace tipfs::stripe
