#include "composer/core/fabric.h"

// The interface is header-only; this unit anchors its vtable in the core library.
