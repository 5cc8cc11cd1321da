// CpuRelax: the body of a spin loop's wait. x86's `pause` (arm64's `yield`) tells the CPU the
// loop only waits: its sibling hyperthread gets the core, and leaving the loop costs no pipeline
// flush. How long one lasts depends on the CPU (tens of cycles on AMD Zen, about 140 on Intel
// since Skylake), so loops that count them bound a number of tries, not a time.
#pragma once

namespace tipfs {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace tipfs
