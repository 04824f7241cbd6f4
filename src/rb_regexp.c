/* rb_regexp.c: Regexp for scripts written for mruby builds that had one
 * (Debian's mruby has none): pattern compilation and matching by httpd's
 * own PCRE wrapper (ap_regcomp, ap_regexec_len). C compiles and returns
 * match offsets; MatchData and the String methods are Ruby
 * (mrblib/regexp.rb). The syntax is PCRE's, with Ruby's defaults: '^' and
 * '$' match at line breaks, '.' does not match a newline unless /m. */

#include "httpd.h"
#include "apr_pools.h"
#include "apr_tables.h"
#include "ap_regex.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "vm.h"

/* Ruby's option bits. */
#define MM_RE_IGNORECASE 1
#define MM_RE_EXTENDED   2
#define MM_RE_MULTILINE  4

/* The compiled pattern: malloc'd, owned by its Regexp object (which may live
 * as long as the VM, e.g. in a constant); freed with it. */
static void regexp_free(mrb_state *mrb, void *p)
{
    if (p) {
        ap_regfree(p);
        free(p);
    }
}

static const mrb_data_type regexp_type = {"Regexp", regexp_free};

/* Matches of up to this many groups need no allocation. */
#define MM_RE_STACK_GROUPS 16

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

/* Regexp.new(pattern, options = nil); Regexp.compile is the same (regexp
 * literals call it). */
static mrb_value regexp_init(mrb_state *mrb, mrb_value self)
{
    mrb_value pat, opt = mrb_nil_value();
    mrb_int bits;
    ap_regex_t *re;
    char *src;
    int cflags, rc;

    mrb_get_args(mrb, "o|o", &pat, &opt);
    if (is_regexp(pat)) {
        if (mrb_nil_p(opt)) {
            opt = mrb_iv_get(mrb, pat, mrb_intern_lit(mrb, "@options"));
        }
        pat = mrb_iv_get(mrb, pat, mrb_intern_lit(mrb, "@source"));
    }
    if (!mrb_string_p(pat)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "Regexp.new: the pattern must be a String, not %s",
                   mrb_obj_classname(mrb, pat));
    }
    if (memchr(RSTRING_PTR(pat), '\0', RSTRING_LEN(pat))) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Regexp.new: a NUL byte in a pattern is not supported (use \\x00)");
    }
    bits = options_of(mrb, opt);
    /* /x has no ap_regcomp flag: PCRE's inline (?x) does it. */
    src = malloc((size_t)RSTRING_LEN(pat) + 5);
    re = calloc(1, sizeof *re);
    if (src == NULL || re == NULL) {
        free(src);
        free(re);
        mrb_raise(mrb, E_RUNTIME_ERROR, "Regexp.new: out of memory");
    }
    strcpy(src, (bits & MM_RE_EXTENDED) ? "(?x)" : "");
    memcpy(src + strlen(src), RSTRING_PTR(pat), (size_t)RSTRING_LEN(pat));
    src[((bits & MM_RE_EXTENDED) ? 4 : 0) + RSTRING_LEN(pat)] = '\0';
    cflags = AP_REG_NO_DEFAULT | AP_REG_NEWLINE | ((bits & MM_RE_IGNORECASE) ? AP_REG_ICASE : 0) |
             ((bits & MM_RE_MULTILINE) ? AP_REG_DOTALL : 0);
    rc = ap_regcomp(re, src, cflags);
    free(src);
    if (rc != 0) {
        char err[256];

        ap_regerror(rc, re, err, sizeof err);
        free(re);
        mrb_raisef(mrb, mrb_class_get(mrb, "RegexpError"), "%s: /%v/", err, pat);
    }
    regexp_free(mrb, DATA_PTR(self));
    mrb_data_init(self, re, &regexp_type);
    mrb_iv_set(mrb, self, mrb_intern_lit(mrb, "@source"), mrb_str_dup(mrb, pat));
    mrb_iv_set(mrb, self, mrb_intern_lit(mrb, "@options"), mrb_fixnum_value(bits));
    mrb_iv_set(mrb, self, mrb_intern_lit(mrb, "@__group_names"), mrb_nil_value()); /* of an earlier pattern */
    return self;
}

/* re.__offsets(str, pos) -> nil or [begin0, end0, begin1, end1, ...] (-1
 * for a group that did not take part), byte offsets into str. */
static mrb_value regexp_offsets(mrb_state *mrb, mrb_value self)
{
    ap_regex_t *re = mrb_data_get_ptr(mrb, self, &regexp_type);
    mrb_value str, result;
    mrb_int pos, i;
    ap_regmatch_t stack[MM_RE_STACK_GROUPS + 1], *m = stack;
    size_t n;
    int eflags = 0, rc;

    mrb_get_args(mrb, "Si", &str, &pos);
    if (re == NULL) {
        mrb_raise(mrb, E_TYPE_ERROR, "uninitialized Regexp");
    }
    if (pos < 0) {
        pos += RSTRING_LEN(str);
    }
    if (pos < 0 || pos > RSTRING_LEN(str)) {
        return mrb_nil_value();
    }
    if (pos > 0 && RSTRING_PTR(str)[pos - 1] != '\n') {
        eflags |= AP_REG_NOTBOL;
    }
    n = re->re_nsub + 1;
    if (n > MM_RE_STACK_GROUPS + 1) {
        /* In a String the GC owns: nothing leaks when an allocation below
         * raises. */
        m = (ap_regmatch_t *)RSTRING_PTR(mrb_str_new(mrb, NULL, (mrb_int)(n * sizeof *m)));
    }
    rc = ap_regexec_len(re, RSTRING_PTR(str) + pos, (apr_size_t)(RSTRING_LEN(str) - pos), n, m, eflags);
    if (rc == AP_REG_NOMATCH) {
        return mrb_nil_value();
    }
    if (rc != 0) {
        /* PCRE gave up (its match limit, out of memory): the match may well
         * be there, so nil, "no match", would be a wrong answer. */
        mrb_raisef(mrb, mrb_class_get(mrb, "RegexpError"),
                   "PCRE gave up matching /%v/ (it backtracks too much for this string)",
                   mrb_iv_get(mrb, self, mrb_intern_lit(mrb, "@source")));
    }
    result = mrb_ary_new_capa(mrb, (mrb_int)n * 2);
    for (i = 0; i < (mrb_int)n; i++) {
        mrb_ary_push(mrb, result, mrb_fixnum_value(m[i].rm_so < 0 ? -1 : m[i].rm_so + pos));
        mrb_ary_push(mrb, result, mrb_fixnum_value(m[i].rm_eo < 0 ? -1 : m[i].rm_eo + pos));
    }
    return result;
}

/* The names of named groups, indexed by group number (nil where unnamed):
 * computed once per pattern, in a scratch pool of the VM's, and kept
 * (frozen) in the Regexp. */
static mrb_value regexp_group_names(mrb_state *mrb, mrb_value self)
{
    ap_regex_t *re = mrb_data_get_ptr(mrb, self, &regexp_type);
    mrb_sym iv = mrb_intern_lit(mrb, "@__group_names");
    mrb_value result = mrb_iv_get(mrb, self, iv);
    apr_array_header_t *names;
    apr_pool_t *p;
    int i;

    if (mrb_array_p(result)) {
        return result;
    }
    result = mrb_ary_new(mrb);
    if (re == NULL || apr_pool_create(&p, mm_vm_of(mrb) ? mm_vm_of(mrb)->pool : NULL) != APR_SUCCESS) {
        return result;
    }
    names = apr_array_make(p, 4, sizeof(const char *));
    ap_regname(re, names, NULL, 0);
    for (i = 0; i < names->nelts; i++) {
        const char *name = APR_ARRAY_IDX(names, i, const char *);

        mrb_ary_push(mrb, result, name ? mrb_str_new_cstr(mrb, name) : mrb_nil_value());
    }
    apr_pool_destroy(p);
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
    mm_vm_t *vm = mm_vm_of(mrb);

    if (!mrb_nil_p(m)) {
        str = mrb_iv_get(mrb, m, mrb_intern_lit(mrb, "@string"));
        off = mrb_iv_get(mrb, m, mrb_intern_lit(mrb, "@offsets"));
        if (!mrb_string_p(str) || !mrb_array_p(off)) {
            mrb_raise(mrb, E_TYPE_ERROR, "Regexp.__set_last_match: not a MatchData");
        }
        if (vm) {
            vm->last_match = 1;
        }
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

void mm_regexp_init(mrb_state *mrb)
{
    struct RClass *re = mrb_define_class(mrb, "Regexp", mrb->object_class);

    if (!mrb_class_defined(mrb, "RegexpError")) {
        mrb_define_class(mrb, "RegexpError", mrb->eStandardError_class);
    }
    MRB_SET_INSTANCE_TT(re, MRB_TT_DATA);
    mrb_define_method(mrb, re, "initialize", regexp_init, MRB_ARGS_ARG(1, 1));
    mrb_define_method(mrb, re, "__offsets", regexp_offsets, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, re, "__group_names", regexp_group_names, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, re, "__set_last_match", regexp_set_last_match, MRB_ARGS_REQ(1));
}
