/* json.h: the JSON module (rb_json.c). It needs mruby alone, not httpd, so
 * that the fuzzing harness (fuzz/fuzz_json.c) links it as it is. */

#ifndef MM_JSON_H
#define MM_JSON_H

#include <mruby.h>

/* Defines JSON (parse, generate, pretty_generate, ...), its errors and
 * Object#to_json in a fresh VM. */
void mm_json_init(mrb_state *mrb);

#endif
