/* json_internal.h: what rb_json.c, json_parse.c and json_generate.c share. */
#ifndef MM_JSON_INTERNAL_H
#define MM_JSON_INTERNAL_H

#include <stddef.h>

#include <mruby.h>

/* As CRuby's JSON: deeper is an error (and the end of a cycle). */
#define MM_JSON_DEPTH_MAX 100

/* The JSON module's hidden instance variable (no "@": Ruby cannot name
 * it) that holds the depth of a generate while a #to_json runs. */
#define MM_JSON_DEPTH_IV "mm_json_depth"

/* The shortest text that reads back as d, in the "C" locale, into buf (room
 * for 40 bytes); its length. */
int mm_json_format_double(double d, char *buf);
/* A number's text (already checked) as a double, in the "C" locale. */
double mm_json_read_double(const char *text);
/* The length of the UTF-8 sequence at s, or 0 when it is not one. */
int mm_json_utf8_len(const unsigned char *s, size_t left);
struct RClass *mm_json_module(mrb_state *mrb);
struct RClass *mm_json_error(mrb_state *mrb, const char *name);
int mm_json_option(mrb_state *mrb, mrb_value kw_value, mrb_value opts, mrb_sym name);

/* The methods (json_parse.c, json_generate.c). */
mrb_value mm_json_parse_m(mrb_state *mrb, mrb_value self);
mrb_value mm_json_generate_m(mrb_state *mrb, mrb_value self);
mrb_value mm_json_pretty_generate_m(mrb_state *mrb, mrb_value self);
mrb_value mm_json_object_to_json(mrb_state *mrb, mrb_value self);

#endif
