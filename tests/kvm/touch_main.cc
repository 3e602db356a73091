// composer_kvm_touch MIB: maps MIB MiB of anonymous memory, touches every page, and prints
// where the kernel put them as /proc/self/numa_maps shows that mapping, one line:
//   pages: N0=12 N1=116 (of 128) policy 2:0x3
// The kvm level runs it under each memory policy the task hook applies: the policy comes in
// COMPOSER_KVM_TASK_POLICY ("MODE:MASK" as get_mempolicy(2) gave them to
// composer_kvm_host_side) and is given to the mapping with mbind(2) before it is touched;
// without it the mapping follows the task's own policy (composer_kvm_host_side --own-policy),
// which get_mempolicy(2) reports.
// Exits 1 with one line when it cannot, 2 on a bad argument.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  char* end = nullptr;
  const unsigned long mib = argc == 2 ? std::strtoul(argv[1], &end, 10) : 0;
  if (argc != 2 || end == argv[1] || *end != '\0' || mib == 0 || mib > 65536) {
    std::cerr << "usage: composer_kvm_touch MIB (1 to 65536: the MiB to allocate and touch)\n";
    return 2;
  }
  const size_t bytes = mib << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("composer_kvm_touch: mmap");
    return 1;
  }
  // Pages of 4 KiB, not transparent huge pages: interleave then alternates page by page, where
  // it would place 2 MiB at a time (16 huge pages of 32 MiB, the partial ones at its ends as
  // small pages, came out 4352:3840 under interleave).
  if (::madvise(p, bytes, MADV_NOHUGEPAGE) != 0) {
    std::perror("composer_kvm_touch: madvise");
    return 1;
  }
  std::string policy;
  if (const char* given = std::getenv("COMPOSER_KVM_TASK_POLICY"); given != nullptr) {
    unsigned long mode = 0;
    unsigned long mask = 0;
    if (std::sscanf(given, "%lu:%lu", &mode, &mask) != 2) {
      std::cerr << "composer_kvm_touch: COMPOSER_KVM_TASK_POLICY '" << given
                << "': expected MODE:MASK\n";
      return 2;
    }
    if (mode != 0 && ::syscall(SYS_mbind, p, bytes, mode, &mask, 64UL, 0U) != 0) {
      std::perror("composer_kvm_touch: mbind");
      return 1;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%lu:0x%lx", mode, mask);
    policy = text;
  } else {
    int mode = 0;
    unsigned long mask = 0;
    if (::syscall(SYS_get_mempolicy, &mode, &mask, 64UL, nullptr, 0UL) != 0) {
      std::perror("composer_kvm_touch: get_mempolicy");
      return 1;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%d:0x%lx", mode, mask);
    policy = text;
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  for (size_t at = 0; at < bytes; at += static_cast<size_t>(page)) {
    static_cast<volatile char*>(p)[at] = 1;
  }
  std::ifstream maps("/proc/self/numa_maps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx ", reinterpret_cast<uintptr_t>(p));
  for (std::string line; std::getline(maps, line);) {
    if (line.rfind(start, 0) != 0) continue;
    std::istringstream words(line);
    std::string out;
    for (std::string w; words >> w;) {
      if (w.size() > 1 && w[0] == 'N' && w.find('=') != std::string::npos) out += " " + w;
    }
    std::cout << "pages:" << out << " (of " << bytes / static_cast<size_t>(page) << ") policy "
              << policy << "\n";
    return 0;
  }
  std::cerr << "composer_kvm_touch: no line for " << p << " in /proc/self/numa_maps\n";
  return 1;
}
