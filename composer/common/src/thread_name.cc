#include "composer/common/thread_name.h"

#include <pthread.h>

#include <string>

namespace composer {

void name_this_thread(std::string_view name) {
  const std::string shown(name.substr(0, 15));
  (void)pthread_setname_np(pthread_self(), shown.c_str());
}

}  // namespace composer
