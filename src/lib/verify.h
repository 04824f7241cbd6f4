/* verify.h: checks loaded mruby bytecode before it may run. */
#ifndef MM_VERIFY_H
#define MM_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include <mruby.h>
#include <mruby/irep.h>

/* How deep ireps (blocks in methods in classes ...) may be nested. */
#define MM_VERIFY_DEPTH_MAX 256

/* Checks the framing of the RITE image bin (len bytes, a bytecode file's
 * contents) before mruby's loader reads it: the header, every section and
 * record, every length inside them, and the line and local-variable tables
 * against the code they describe. Returns 1 when it passes; otherwise 0,
 * with what failed written into why (why_len bytes, NUL-terminated). */
int mm_verify_rite(const uint8_t *bin, size_t len, char *why, size_t why_len);

/* Checks irep and the ireps under it: every instruction known and whole,
 * every register, symbol, literal and child index in range, every jump
 * and exception handler landing on an instruction of its own irep.
 * mruby's VM trusts all of these, so bytecode that fails one (a damaged
 * file) must not run. Returns 1 when it passes; otherwise 0, with what
 * failed written into why (why_len bytes, NUL-terminated). */
int mm_verify_irep(const mrb_irep *irep, char *why, size_t why_len);

#endif
