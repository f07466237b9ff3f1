// cpu_relax.h: CpuRelax(), the pause of one iteration of a spin loop.
//
//   while (!ready.load(std::memory_order_acquire)) platform::CpuRelax();
//
// On x86 it is PAUSE, which tells the CPU a spin loop is running (it stops
// speculating down the loop, saves power, and on a hyperthread gives the
// sibling the core); on aarch64 YIELD, the same hint (the kernel's
// cpu_relax() in arch/x86/include/asm/vdso/processor.h and
// arch/arm64/include/asm/vdso/processor.h). Elsewhere it is only a compiler
// barrier, so that the loop's loads are not hoisted out of it. It never
// enters the kernel: a loop that may spin long must still yield or sleep.
//
// Thread safety: a hint with no state; call from anywhere.
#ifndef ZTIER_PLATFORM_CPU_RELAX_H_
#define ZTIER_PLATFORM_CPU_RELAX_H_

namespace ztier::platform {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_CPU_RELAX_H_
