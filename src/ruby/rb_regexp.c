/* rb_regexp.c: Regexp for scripts written for mruby builds that had one
 * (Debian's mruby has none): pattern compilation and matching by PCRE2
 * (libpcre2-8, the library httpd itself uses). C compiles and returns match
 * offsets; MatchData and the String methods are Ruby (mrblib/regexp.rb).
 * A match from a position inside a string (gsub, scan and split search
 * from one on every pass) is made with the whole string as its context, so
 * \b, \B, \A, ^ and lookbehind see the text before the position, as in
 * Ruby. The syntax is PCRE's, with Ruby's defaults: '^' and '$' match at
 * line breaks, '.' does not match a newline unless /m. */

#define PCRE2_CODE_UNIT_WIDTH 8

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <pcre2.h>

#include "apr_pools.h"

#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "classes.h"
#include "vm.h"

/* Ruby's option bits. */
#define MM_RE_IGNORECASE 1
#define MM_RE_EXTENDED   2
#define MM_RE_MULTILINE  4

/* The compiled pattern: owned by its Regexp object (which may live as long
 * as the VM, e.g. in a constant); freed with it. */
static void regexp_free(mrb_state *mrb, void *p)
{
    pcre2_code_free(p);
}

static const mrb_data_type regexp_type = {"Regexp", regexp_free};

/* The match data the VM's matches fill: one for all its Regexps (a VM
 * belongs to one thread at a time, and a match runs no Ruby), made with
 * room for 16 groups or for the most groups a pattern had, so a match
 * allocates nothing. PCRE keeps its backtracking frames in it from one
 * match to the next (20 KiB, but as much as a long subject took): its
 * allocations are seen here, and a match data that grew past
 * MM_RE_FRAMES_KEEP is dropped after the match. Kept in the VM
 * (vm->re_match), made at its first match, freed with the VM's pool. */
#define MM_RE_GROUPS      16
#define MM_RE_FRAMES_KEEP (256 * 1024)

struct mm_re_match {
    pcre2_general_context *gctx; /* its allocator: malloc, counted */
    pcre2_match_data *md;        /* NULL until a match needs it */
    uint32_t pairs;              /* md's ovector: offset pairs */
    size_t last;                 /* the size of its last allocation */
};

static void *match_malloc(PCRE2_SIZE size, void *data)
{
    ((struct mm_re_match *)data)->last = size;
    return malloc(size);
}

static void match_release(void *p, void *data)
{
    free(p);
}

static void match_drop(struct mm_re_match *mt)
{
    pcre2_match_data_free(mt->md);
    mt->md = NULL;
    mt->pairs = 0;
    mt->last = 0;
}

/* After a match: frames grown past MM_RE_FRAMES_KEEP are not kept. */
static void match_trim(struct mm_re_match *mt)
{
    if (mt->last > MM_RE_FRAMES_KEEP) {
        match_drop(mt);
    }
}

static apr_status_t match_cleanup(void *p)
{
    struct mm_re_match *mt = p;

    pcre2_match_data_free(mt->md);
    pcre2_general_context_free(mt->gctx);
    return APR_SUCCESS;
}

/* The VM's match data, with room for pairs offset pairs. */
static struct mm_re_match *match_data(mrb_state *mrb, uint32_t pairs)
{
    mm_vm_t *vm = mm_vm_of(mrb);
    struct mm_re_match *mt = vm->re_match;

    if (mt == NULL) {
        mt = apr_pcalloc(mm_vm_pool_or_raise(mrb, "Regexp"), sizeof *mt);
        mt->gctx = pcre2_general_context_create(match_malloc, match_release, mt);
        if (mt->gctx == NULL) {
            mrb_raise(mrb, E_RUNTIME_ERROR, "Regexp: out of memory");
        }
        apr_pool_cleanup_register(vm->pool, mt, match_cleanup, apr_pool_cleanup_null);
        vm->re_match = mt;
    }
    if (mt->md && mt->pairs < pairs) {
        match_drop(mt);
    }
    if (mt->md == NULL) {
        mt->pairs = pairs > MM_RE_GROUPS + 1 ? pairs : MM_RE_GROUPS + 1;
        mt->md = pcre2_match_data_create(mt->pairs, mt->gctx);
        if (mt->md == NULL) {
            mt->pairs = 0;
            mrb_raise(mrb, E_RUNTIME_ERROR, "Regexp: out of memory");
        }
    }
    return mt;
}

static int is_regexp(mrb_value v)
{
    return mrb_type(v) == MRB_TT_DATA && DATA_TYPE(v) == &regexp_type;
}

static mrb_int options_of(mrb_state *mrb, mrb_value opt)
{
    mrb_int bits = 0;

    if (mrb_nil_p(opt) || mrb_false_p(opt)) {
        return 0;
    }
    if (mrb_fixnum_p(opt)) {
        return mrb_fixnum(opt) & (MM_RE_IGNORECASE | MM_RE_EXTENDED | MM_RE_MULTILINE);
    }
    if (mrb_string_p(opt)) { /* a literal's flags: "imx" */
        mrb_int i;

        for (i = 0; i < RSTRING_LEN(opt); i++) {
            char c = RSTRING_PTR(opt)[i];
            bits |= c == 'i' ? MM_RE_IGNORECASE : c == 'x' ? MM_RE_EXTENDED : c == 'm' ? MM_RE_MULTILINE : 0;
        }
        return bits;
    }
    return MM_RE_IGNORECASE; /* any other true value, as Ruby has it */
}

static mrb_value regexp_source(mrb_state *mrb, mrb_value self)
{
    return mrb_iv_get(mrb, self, mrb_intern_lit(mrb, "@source"));
}

/* Regexp.new(pattern, options = nil); Regexp.compile is the same (regexp
 * literals call it). */
static mrb_value regexp_init(mrb_state *mrb, mrb_value self)
{
    mrb_value pat, opt = mrb_nil_value();
    mrb_int bits;
    pcre2_code *code;
    uint32_t cflags;
    int err;
    PCRE2_SIZE at;

    mrb_get_args(mrb, "o|o", &pat, &opt);
    if (is_regexp(pat)) {
        if (mrb_nil_p(opt)) {
            opt = mrb_iv_get(mrb, pat, mrb_intern_lit(mrb, "@options"));
        }
        pat = regexp_source(mrb, pat);
    }
    if (!mrb_string_p(pat)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "Regexp.new: the pattern must be a String, not %s",
                   mrb_obj_classname(mrb, pat));
    }
    bits = options_of(mrb, opt);
    cflags = PCRE2_MULTILINE | ((bits & MM_RE_IGNORECASE) ? PCRE2_CASELESS : 0) |
             ((bits & MM_RE_EXTENDED) ? PCRE2_EXTENDED : 0) | ((bits & MM_RE_MULTILINE) ? PCRE2_DOTALL : 0);
    /* By length: a NUL byte in the pattern is a character like any other.
     * Nothing below allocates from mruby until the compiled pattern has an
     * owner, so nothing leaks when an allocation raises. */
    code = pcre2_compile((PCRE2_SPTR)RSTRING_PTR(pat), (PCRE2_SIZE)RSTRING_LEN(pat), cflags, &err, &at, NULL);
    if (code == NULL) {
        PCRE2_UCHAR msg[256];

        if (pcre2_get_error_message(err, msg, sizeof msg) < 0) {
            strcpy((char *)msg, "invalid pattern");
        }
        mrb_raisef(mrb, mrb_class_get(mrb, "RegexpError"), "%s at offset %d: /%v/", (const char *)msg,
                   (int)at, pat);
    }
    regexp_free(mrb, DATA_PTR(self));
    mrb_data_init(self, code, &regexp_type);
    mrb_iv_set(mrb, self, mrb_intern_lit(mrb, "@source"), mrb_str_dup(mrb, pat));
    mrb_iv_set(mrb, self, mrb_intern_lit(mrb, "@options"), mrb_fixnum_value(bits));
    mrb_iv_set(mrb, self, mrb_intern_lit(mrb, "@__group_names"), mrb_nil_value()); /* of an earlier pattern */
    return self;
}

/* dup and clone: mruby copies the instance variables (@source, @options,
 * the group names), then calls this for what they do not hold, the
 * compiled pattern. Each copy owns its own, freed with it. */
static mrb_value regexp_init_copy(mrb_state *mrb, mrb_value self)
{
    mrb_value orig = mrb_get_arg1(mrb);
    pcre2_code *code;

    if (mrb_obj_equal(mrb, self, orig)) {
        return self;
    }
    if (!is_regexp(orig) || DATA_PTR(orig) == NULL) {
        mrb_raise(mrb, E_TYPE_ERROR, "initialize_copy: not an initialized Regexp");
    }
    code = pcre2_code_copy(DATA_PTR(orig));
    if (code == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Regexp: out of memory");
    }
    regexp_free(mrb, DATA_PTR(self));
    mrb_data_init(self, code, &regexp_type);
    return self;
}

/* re.__offsets(str, pos) -> nil or [begin0, end0, begin1, end1, ...] (-1
 * for a group that did not take part), byte offsets into str. The match
 * starts at pos with all of str as its subject. */
static mrb_value regexp_offsets(mrb_state *mrb, mrb_value self)
{
    pcre2_code *code;
    struct mm_re_match *mt;
    mrb_value str, result;
    mrb_int pos, i;
    uint32_t groups = 0, n;
    PCRE2_SIZE *ov;
    int rc;

    mrb_get_args(mrb, "Si", &str, &pos);
    code = mrb_data_get_ptr(mrb, self, &regexp_type);
    if (code == NULL) {
        mrb_raise(mrb, E_TYPE_ERROR, "uninitialized Regexp");
    }
    if (pos < 0) {
        pos += RSTRING_LEN(str);
    }
    if (pos < 0 || pos > RSTRING_LEN(str)) {
        return mrb_nil_value();
    }
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
    n = groups + 1;
    mt = match_data(mrb, n);
    rc = pcre2_match(code, (PCRE2_SPTR)RSTRING_PTR(str), (PCRE2_SIZE)RSTRING_LEN(str), (PCRE2_SIZE)pos, 0,
                     mt->md, NULL);
    if (rc < 0) {
        match_trim(mt);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
        return mrb_nil_value();
    }
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT) {
        /* PCRE gave up: the match may well be there, so nil, "no match",
         * would be a wrong answer. */
        mrb_raisef(mrb, mrb_class_get(mrb, "RegexpError"),
                   "PCRE gave up matching /%v/ (it backtracks too much for this string)",
                   regexp_source(mrb, self));
    }
    if (rc < 0) { /* out of memory, or what should not happen */
        PCRE2_UCHAR msg[256];

        if (pcre2_get_error_message(rc, msg, sizeof msg) < 0) {
            strcpy((char *)msg, "unknown error");
        }
        mrb_raisef(mrb, mrb_class_get(mrb, "RegexpError"), "PCRE could not match /%v/: %s",
                   regexp_source(mrb, self), (const char *)msg);
    }
    /* rc is 1 + the last group set (the ovector has room for all); the
     * groups after it did not take part. Nothing matches again before the
     * ovector is read: nothing below runs Ruby. */
    ov = pcre2_get_ovector_pointer(mt->md);
    result = mrb_ary_new_capa(mrb, (mrb_int)n * 2);
    for (i = 0; i < (mrb_int)n; i++) {
        int set = i < rc && ov[2 * i] != PCRE2_UNSET;

        mrb_ary_push(mrb, result, mrb_fixnum_value(set ? (mrb_int)ov[2 * i] : -1));
        mrb_ary_push(mrb, result, mrb_fixnum_value(set ? (mrb_int)ov[2 * i + 1] : -1));
    }
    match_trim(mt);
    return result;
}

/* The names of named groups, indexed by group number (nil where unnamed,
 * up to the last named group): computed once per pattern and kept (frozen)
 * in the Regexp. PCRE's name table has an entry per name: the group's
 * number in two bytes, big-endian, then the name and a NUL. */
static mrb_value regexp_group_names(mrb_state *mrb, mrb_value self)
{
    pcre2_code *code = mrb_data_get_ptr(mrb, self, &regexp_type);
    mrb_sym iv = mrb_intern_lit(mrb, "@__group_names");
    mrb_value result = mrb_iv_get(mrb, self, iv);
    uint32_t count = 0, size = 0, i;
    PCRE2_SPTR table = NULL;

    if (mrb_array_p(result)) {
        return result;
    }
    result = mrb_ary_new(mrb);
    if (code && pcre2_pattern_info(code, PCRE2_INFO_NAMECOUNT, &count) == 0 && count > 0 &&
        pcre2_pattern_info(code, PCRE2_INFO_NAMEENTRYSIZE, &size) == 0 &&
        pcre2_pattern_info(code, PCRE2_INFO_NAMETABLE, &table) == 0 && table && size > 2) {
        for (i = 0; i < count; i++) {
            PCRE2_SPTR entry = table + (size_t)i * size;
            mrb_int group = (mrb_int)entry[0] << 8 | entry[1];
            int ai = mrb_gc_arena_save(mrb);

            /* The table lives in the compiled pattern, which nothing here
             * can free: a Regexp is initialized again only by Ruby code. */
            mrb_ary_set(mrb, result, group, mrb_str_new_cstr(mrb, (const char *)entry + 2));
            mrb_gc_arena_restore(mrb, ai);
        }
    }
    MRB_SET_FROZEN_FLAG(mrb_basic_ptr(result));
    mrb_iv_set(mrb, self, iv, result);
    return result;
}

/* Sets $~ and $1..$9 (mruby compiles $1 as the global "$1") to a
 * MatchData's groups, or to nil. */
static void set_last_match(mrb_state *mrb, mrb_value m, mrb_value str, mrb_value off)
{
    static const char names[] = "$1\0$2\0$3\0$4\0$5\0$6\0$7\0$8\0$9";
    int i;

    mrb_gv_set(mrb, mrb_intern_lit(mrb, "$~"), m);
    for (i = 1; i <= 9; i++) {
        mrb_value v = mrb_nil_value();

        if (!mrb_nil_p(m) && RARRAY_LEN(off) >= 2 * i + 2) {
            mrb_value b = RARRAY_PTR(off)[2 * i], e = RARRAY_PTR(off)[2 * i + 1];

            if (mrb_integer_p(b) && mrb_integer_p(e) && mrb_integer(b) >= 0 &&
                mrb_integer(e) >= mrb_integer(b)) {
                v = mrb_str_substr(mrb, str, mrb_integer(b), mrb_integer(e) - mrb_integer(b));
            }
        }
        mrb_gv_set(mrb, mrb_intern_static(mrb, names + 3 * (i - 1), 2), v);
    }
}

/* Regexp.__set_last_match(m): $~ and $1..$9 from a MatchData (or nil): its
 * groups are what MatchData#[] answers, substrings of @string at the byte
 * offsets in @offsets. */
static mrb_value regexp_set_last_match(mrb_state *mrb, mrb_value self)
{
    mrb_value m = mrb_get_arg1(mrb), str = mrb_nil_value(), off = mrb_nil_value();

    if (!mrb_nil_p(m)) {
        str = mrb_iv_get(mrb, m, mrb_intern_lit(mrb, "@string"));
        off = mrb_iv_get(mrb, m, mrb_intern_lit(mrb, "@offsets"));
        if (!mrb_string_p(str) || !mrb_array_p(off)) {
            mrb_raise(mrb, E_TYPE_ERROR, "Regexp.__set_last_match: not a MatchData");
        }
        mm_vm_of(mrb)->last_match = 1;
    }
    set_last_match(mrb, m, str, off);
    return m;
}

void mm_regexp_forget(mm_vm_t *vm)
{
    if (vm->last_match) {
        vm->last_match = 0;
        set_last_match(vm->mrb, mrb_nil_value(), mrb_nil_value(), mrb_nil_value());
    }
}

/* String#split: with a Regexp, Ruby's (__mm_split_re in mrblib/regexp.rb);
 * with anything else mruby's own method, called in this same frame, where
 * it reads the same arguments. In C because split is in many handlers'
 * path (a query string's pairs): a Ruby method in front of mruby's, which
 * asked is_a?(Regexp) and called it, cost about 1,400 instructions a call
 * (benchmarks.md). A Regexp is known by its data type: any object made by
 * Regexp.new or a subclass's. */
static mrb_value string_split(mrb_state *mrb, mrb_value self)
{
    mrb_int argc = mrb_get_argc(mrb);
    const mrb_value *argv = mrb_get_argv(mrb);

    if (argc > 0 && mrb_data_p(argv[0]) && DATA_TYPE(argv[0]) == &regexp_type) {
        return mrb_funcall_argv(mrb, self, mrb_intern_lit(mrb, "__mm_split_re"), argc, argv);
    }
    return mm_vm_of(mrb)->str_split(mrb, self);
}

/* Puts string_split in the place of mruby's String#split (a C method in
 * mruby 3.1's string.c), kept in the VM for it to call. */
static void string_split_init(mrb_state *mrb)
{
    struct RClass *cls = mrb->string_class;
    mrb_method_t m = mrb_method_search(mrb, cls, mrb_intern_lit(mrb, "split"));
    mrb_func_t own = MRB_METHOD_CFUNC_P(m) ? MRB_METHOD_CFUNC(m) : NULL;

    if (own == NULL || own == string_split) {
        mrb_raise(mrb, E_NOTIMP_ERROR, "Regexp: mruby's String#split is not the C method of mruby 3.1");
    }
    mm_vm_of(mrb)->str_split = own;
    mrb_define_method(mrb, cls, "split", string_split, MRB_ARGS_OPT(2));
}

void mm_regexp_init(mrb_state *mrb)
{
    struct RClass *re = mrb_define_class(mrb, "Regexp", mrb->object_class);

    if (!mrb_class_defined(mrb, "RegexpError")) {
        mrb_define_class(mrb, "RegexpError", mrb->eStandardError_class);
    }
    MRB_SET_INSTANCE_TT(re, MRB_TT_DATA);
    mrb_define_method(mrb, re, "initialize", regexp_init, MRB_ARGS_ARG(1, 1));
    mrb_define_method(mrb, re, "initialize_copy", regexp_init_copy, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, re, "__offsets", regexp_offsets, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, re, "__group_names", regexp_group_names, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, re, "__set_last_match", regexp_set_last_match, MRB_ARGS_REQ(1));
    string_split_init(mrb);
}
