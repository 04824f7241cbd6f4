/* guard.h: checks in front of the methods of mruby 3.1 that scripts could
 * crash the process with (guard.c). */
#ifndef MM_GUARD_H
#define MM_GUARD_H

#include <mruby.h>

/* Installs them in a new VM, before any script runs in it. */
void mm_guard_init(mrb_state *mrb);

#endif
