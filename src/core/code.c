/* code.c: compiles Ruby code once and loads the bytecode into each VM.
 *
 * Inline code and `cache` files are compiled while the configuration is read;
 * their RITE images live in pconf and every VM loads one on first use. Other
 * file scripts (AddHandler mruby-script, mrubyHandler without `cache`) are
 * compiled on first use. Their image goes into a process-wide table keyed by
 * path and stamped with the file's inode, size and times: every thread then
 * loads the image without parsing again, and a changed stamp (seen in
 * r->finfo, which httpd has already filled) makes the next request recompile.
 * Nothing here is consulted per request beyond one hash lookup in the
 * thread's own VM. */

#include "apr_file_io.h"
#include "apr_lib.h"
#include "apr_hash.h"
#include "apr_strings.h"
#include "apr_thread_mutex.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/compile.h>
#include <mruby/dump.h>
#include <mruby/error.h>
#include <mruby/irep.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "code.h"
#include "config.h"
#include "mod_mruby.h"
#include "mruby_internal.h"
#include "verify.h"

APLOG_USE_MODULE(mruby);

/* Script files larger than this (source or bytecode) are refused: they are
 * certainly a mistake, and each would be read whole into memory. A whole
 * number of MB (the message says it so); documented in docs/directives.md. */
#define MM_SCRIPT_MAX_BYTES (16 * 1024 * 1024)

/* mruby keeps line numbers in 16 bits (its parser and its debug info): past
 * this line, errors and backtraces name wrong lines. Documented in
 * docs/directives.md. */
#define MM_SCRIPT_MAX_LINE 65535

/* Room for why an image did not load. */
#define MM_LOAD_WHY 256

/* One file's compiled image, shared by the threads of a process. */
typedef struct {
    mm_stamp_t stamp;
    uint8_t *bin; /* malloc: RITE image; NULL when the file did not compile */
    size_t bin_len;
    char *error; /* malloc: why it did not compile, or NULL */
} mm_image_t;

static int script_count;      /* scripts configured so far in this generation */
static mrb_state *config_mrb; /* compiles configured code; closed after config */

static struct {
    apr_thread_mutex_t *lock; /* guards pool and images */
    apr_pool_t *pool;         /* private allocator, so threads may use it under lock */
    apr_hash_t *images;       /* path -> mm_image_t */
} shared;

static void stamp_of(mm_stamp_t *st, const apr_finfo_t *fi)
{
    st->inode = fi->inode;
    st->device = fi->device;
    st->size = fi->size;
    st->mtime = fi->mtime;
    st->ctime = fi->ctime;
}

static int stamp_eq(const mm_stamp_t *a, const mm_stamp_t *b)
{
    return a->inode == b->inode && a->device == b->device && a->size == b->size && a->mtime == b->mtime &&
           a->ctime == b->ctime;
}

/* ------------------------------------------------------------------ compiling */

/* ------------------------------------------------------- bounded parsing */

/* mruby 3.1's parser adds each statement of a body, each argument, array
 * element or hash pair to its list by walking the list from its head, so a
 * list of n items costs n * n / 2 steps: 20,000 statements take a second,
 * 250,000 (a megabyte of `a=1;`) several minutes, and mruby has no way to
 * stop it. But it reads its input as it goes: given a stdio stream of our
 * own, it asks for the next MM_FEED_CHUNK bytes after parsing the ones
 * before, and the stream ends the input once the thread has spent more CPU
 * time than mrubyCompileLimit allows; the parser then stops at once (with
 * a syntax error, or a program cut short that is thrown away). CPU time
 * of the thread, not the clock: other processes' load does not count. */
#define MM_FEED_CHUNK 1024

/* Evaluated strings shorter than this are not parsed twice
 * (mm_code_guard_eval): a list in them is at most a few thousand items,
 * which mruby parses in milliseconds. */
#define MM_EVAL_CHECK_BYTES 4096

typedef struct {
    const char *src;
    size_t len;
    size_t pos;            /* bytes handed to the parser so far */
    apr_uint64_t deadline; /* thread CPU time, ns; 0: none */
    int stopped;           /* the deadline passed: the input was cut */
} mm_feed_t;

static apr_uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (apr_uint64_t)ts.tv_sec * 1000000000u + (apr_uint64_t)ts.tv_nsec;
}

static ssize_t feed_read(void *cookie, char *buf, size_t size)
{
    mm_feed_t *feed = cookie;
    size_t n = feed->len - feed->pos;

    if (feed->deadline && thread_cpu_ns() > feed->deadline) {
        feed->stopped = 1;
        return 0;
    }
    if (n > size) {
        n = size;
    }
    memcpy(buf, feed->src + feed->pos, n);
    feed->pos += n;
    return (ssize_t)n;
}

/* Opens the stream the parser reads src from, starting the clock of
 * mrubyCompileLimit. The caller closes it (fclose), also when mruby raised
 * while parsing. */
static FILE *feed_open(mm_feed_t *feed, const char *src, size_t len)
{
    static const cookie_io_functions_t io = {feed_read, NULL, NULL, NULL};
    FILE *f;

    memset(feed, 0, sizeof *feed);
    feed->src = src;
    feed->len = len;
    if (mm_settings.compile_ms) {
        feed->deadline = thread_cpu_ns() + mm_settings.compile_ms * 1000000u;
    }
    f = fopencookie(feed, "r", io);
    if (f) {
        /* mruby reads a byte at a time: small refills, and no lock each */
        setvbuf(f, NULL, _IOFBF, MM_FEED_CHUNK);
        __fsetlocking(f, FSETLOCKING_BYCALLER);
    }
    return f;
}

/* The line of src the parser had reached when it was stopped (within a
 * chunk). */
static long feed_line(const mm_feed_t *feed, int first)
{
    const char *p = feed->src, *end = feed->src + feed->pos;
    long line = first;

    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        line++;
        p++;
    }
    return line;
}

/* ------------------------------------------------------------------ compiling */

typedef struct {
    const char *name;  /* file name recorded in the debug info */
    const char *label; /* what the script is called in errors of the limits */
    const char *src;
    size_t len;
    int lineno; /* line number of the first line of src */
    int dump;   /* also produce a RITE image */
    long lines; /* set by compile: how many lines src has */
    FILE *in;   /* the stream src is parsed from */
    mm_feed_t feed;
    uint8_t *bin; /* mrb_malloc'd image when dump */
    size_t bin_len;
    int limit;       /* set by compile: the error is mrubyCompileLimit's */
    char error[512]; /* "name:line:col: message" for a syntax error */
} mm_compile_t;

static void limit_error(mm_compile_t *c)
{
    c->limit = 1;
    snprintf(c->error, sizeof c->error,
             "%s: compiling stopped after %" APR_UINT64_T_FMT " ms of CPU time, near line %ld of %ld "
             "(mruby's parser is slow on long lists: of statements, arguments, array or hash items); "
             "see mrubyCompileLimit",
             c->label, mm_settings.compile_ms, feed_line(&c->feed, c->lineno), c->lineno + c->lines - 1);
}

static mrb_value compile_body(mrb_state *mrb, void *ud)
{
    mm_compile_t *c = ud;
    mrbc_context *cxt = mrbc_context_new(mrb);
    struct mrb_parser_state *ps;
    struct RProc *proc = NULL;

    mrbc_filename(mrb, cxt, c->name);
    cxt->capture_errors = TRUE;
    cxt->lineno = (uint16_t)(c->lineno > 0 && c->lineno < 65536 ? c->lineno : 1);
    ps = mrb_parse_file(mrb, c->in, cxt);
    if (ps == NULL) {
        snprintf(c->error, sizeof c->error, "%s: out of memory while parsing", c->name);
    } else if (c->feed.stopped) {
        limit_error(c);
    } else if (ps->nerr > 0) {
        snprintf(c->error, sizeof c->error, "%s:%d:%d: %s", c->name, (int)ps->error_buffer[0].lineno,
                 (int)ps->error_buffer[0].column, ps->error_buffer[0].message);
    } else {
        proc = mrb_generate_code(mrb, ps);
        if (proc == NULL) {
            snprintf(c->error, sizeof c->error, "%s: code generation failed", c->name);
        }
    }
    if (ps) {
        mrb_parser_free(ps);
    }
    mrbc_context_free(mrb, cxt);
    if (proc == NULL) {
        return mrb_nil_value();
    }
    mm_mi_proc_make_toplevel(mrb, proc);
    if (c->dump &&
        mrb_dump_irep(mrb, mm_mi_proc_irep(proc), MRB_DUMP_DEBUG_INFO, &c->bin, &c->bin_len) != MRB_DUMP_OK) {
        snprintf(c->error, sizeof c->error, "%s: cannot dump bytecode", c->name);
        return mrb_nil_value();
    }
    return mrb_obj_value(proc);
}

/* The lines of a text: its newlines, and one more for a last line that
 * has none. */
static long count_lines(const char *src, size_t len)
{
    const char *end = src + len, *nl;
    long n = 0;

    while ((nl = memchr(src, '\n', (size_t)(end - src))) != NULL) {
        n++;
        src = nl + 1;
    }
    return n + (src < end);
}

/* A script whose last line is past what mruby can number is compiled all
 * the same, with a warning (also when it does not compile: the line of its
 * syntax error may be wrong), logged where it is compiled: once each time
 * the configuration is read, or when a process compiles the file. */
static void warn_if_too_long(server_rec *s, const char *name, const mm_compile_t *c)
{
    if (c->lineno + c->lines - 1 > MM_SCRIPT_MAX_LINE) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     MM_LOGNO(00022) "%s has %ld lines: mruby numbers lines in 16 bits, so errors and "
                                     "backtraces past line %d name wrong lines",
                     name, c->lines, MM_SCRIPT_MAX_LINE);
    }
}

/* Compiles c->src in mrb. Returns the proc (protected in the GC arena), or
 * NULL with c->error set. */
static struct RProc *compile(mrb_state *mrb, mm_compile_t *c)
{
    mrb_bool raised = FALSE;
    mrb_value v;

    c->error[0] = '\0';
    c->bin = NULL;
    c->limit = 0;
    /* A UTF-8 byte order mark, which some editors put at the start of a
     * file: Ruby skips it, mruby's parser would read it as the first
     * characters of a method name (NoMethodError on every run). */
    if (c->len >= 3 && memcmp(c->src, "\xEF\xBB\xBF", 3) == 0) {
        c->src += 3;
        c->len -= 3;
    }
    c->lines = count_lines(c->src, c->len);
    if (c->len > mm_settings.compile_bytes) {
        c->limit = 1;
        snprintf(c->error, sizeof c->error,
                 "%s: %" APR_SIZE_T_FMT " bytes of Ruby, over the %" APR_SIZE_T_FMT
                 " that mrubyCompileLimit allows",
                 c->label, c->len, mm_settings.compile_bytes);
        return NULL;
    }
    c->in = feed_open(&c->feed, c->src, c->len);
    if (c->in == NULL) {
        snprintf(c->error, sizeof c->error, "%s: cannot open a stream to parse from", c->name);
        return NULL;
    }
    v = mrb_protect_error(mrb, compile_body, c, &raised);
    fclose(c->in);
    c->in = NULL;
    if (raised && c->feed.stopped) {
        limit_error(c);
        return NULL;
    }
    if (raised) {
        snprintf(c->error, sizeof c->error, "%s: %s while compiling", c->name, mrb_obj_classname(mrb, v));
        return NULL;
    }
    return mrb_nil_p(v) ? NULL : mrb_proc_ptr(v);
}

typedef struct {
    const uint8_t *bin;
    size_t len;
    int check; /* bytecode from a file: check it before it may run */
    char *why; /* why it was refused */
    size_t why_len;
} mm_load_t;

static mrb_value load_body(mrb_state *mrb, void *ud)
{
    mm_load_t *l = ud;
    char detail[MM_LOAD_WHY - 32];
    mrb_irep *irep;
    struct RProc *proc;

    /* mruby's loader trusts the lengths in the file, and its VM every index
     * in the code: a damaged file must not be read, nor run (rite.c,
     * verify.c). */
    if (l->check && !mm_verify_rite(l->bin, l->len, detail, sizeof detail)) {
        snprintf(l->why, l->why_len, "invalid mruby bytecode: %s", detail);
        return mrb_nil_value();
    }
    irep = mrb_read_irep_buf(mrb, l->bin, l->len);
    if (irep == NULL) {
        snprintf(l->why, l->why_len, "invalid or incompatible mruby bytecode");
        return mrb_nil_value();
    }
    if (l->check && !mm_verify_irep(irep, detail, sizeof detail)) {
        snprintf(l->why, l->why_len, "invalid mruby bytecode: %s", detail);
        mrb_irep_decref(mrb, irep);
        return mrb_nil_value();
    }
    proc = mrb_proc_new(mrb, irep);
    mrb_irep_decref(mrb, irep);
    mm_mi_proc_make_toplevel(mrb, proc);
    return mrb_obj_value(proc);
}

/* Loads a RITE image (copied: the image may be freed afterwards). Returns
 * the proc, protected in the GC arena, or NULL with why it failed in why
 * (why_len bytes). check: the image is a bytecode file's, not yet checked;
 * an image compiled here, or checked once already, is not checked again. */
static struct RProc *load(mrb_state *mrb, const uint8_t *bin, size_t len, int check, char *why,
                          size_t why_len)
{
    mm_load_t l = {bin, len, check, why, why_len};
    mrb_bool raised = FALSE;
    mrb_value v;

    snprintf(why, why_len, "cannot load its bytecode");
    v = mrb_protect_error(mrb, load_body, &l, &raised);
    return (raised || mrb_nil_p(v)) ? NULL : mrb_proc_ptr(v);
}

/* mrbc's output starts with "RITE" and four digits, the format version
 * ("0300"). The identifier alone would also match Ruby source that starts
 * with a constant (RITES = ...), which must be compiled, not refused as
 * bytecode. */
static int is_rite(const char *data, apr_size_t len)
{
    return len >= 8 && memcmp(data, "RITE", 4) == 0 && apr_isdigit(data[4]) && apr_isdigit(data[5]) &&
           apr_isdigit(data[6]) && apr_isdigit(data[7]);
}

/* Reads a whole script file into p. On success also fills *fi with the
 * stamp of what was read. */
static const char *read_file(const char *path, apr_pool_t *p, char **data, apr_size_t *len, apr_finfo_t *fi)
{
    apr_file_t *f;
    apr_status_t rv;
    char *buf;

    /* Opening a FIFO waits for a writer: `apachectl -t` (or the request)
     * would hang. What is not a regular file is refused before it is opened;
     * the check after opening covers a file replaced in between. */
    rv = apr_stat(fi, path, APR_FINFO_TYPE, p);
    if ((rv == APR_SUCCESS || rv == APR_INCOMPLETE) && fi->filetype != APR_REG) {
        return apr_psprintf(p, "%s is not a regular file", path);
    }
    rv = apr_file_open(&f, path, APR_FOPEN_READ | APR_FOPEN_BINARY, APR_OS_DEFAULT, p);
    if (rv != APR_SUCCESS) {
        return apr_psprintf(p, "cannot open %s: %pm", path, &rv);
    }
    rv = apr_file_info_get(fi, APR_FINFO_MIN | APR_FINFO_IDENT, f);
    if (rv != APR_SUCCESS && rv != APR_INCOMPLETE) {
        apr_file_close(f);
        return apr_psprintf(p, "cannot stat %s: %pm", path, &rv);
    }
    if (fi->filetype != APR_REG) {
        apr_file_close(f);
        return apr_psprintf(p, "%s is not a regular file", path);
    }
    if (fi->size > MM_SCRIPT_MAX_BYTES) {
        apr_file_close(f);
        return apr_psprintf(
            p, "%s is %" APR_OFF_T_FMT " bytes, over the %d MB (%d bytes) a script file may have", path,
            fi->size, MM_SCRIPT_MAX_BYTES >> 20, MM_SCRIPT_MAX_BYTES);
    }
    buf = apr_palloc(p, (apr_size_t)fi->size + 1);
    rv = apr_file_read_full(f, buf, (apr_size_t)fi->size, len);
    apr_file_close(f);
    if (rv != APR_SUCCESS && rv != APR_EOF) {
        return apr_psprintf(p, "cannot read %s: %pm", path, &rv);
    }
    buf[*len] = '\0';
    *data = buf;
    return NULL;
}

/* ------------------------------------------------------------ shared images */

/* Replaces path's shared image. bin and error are malloc'd (or NULL) and
 * become the table's. */
static void image_publish(const char *path, const mm_stamp_t *stamp, uint8_t *bin, size_t bin_len,
                          char *error)
{
    mm_image_t *im;

    apr_thread_mutex_lock(shared.lock);
    im = apr_hash_get(shared.images, path, APR_HASH_KEY_STRING);
    if (im == NULL) {
        im = apr_pcalloc(shared.pool, sizeof *im);
        apr_hash_set(shared.images, apr_pstrdup(shared.pool, path), APR_HASH_KEY_STRING, im);
    }
    free(im->bin);
    free(im->error);
    im->stamp = *stamp;
    im->bin = bin;
    im->bin_len = bin_len;
    im->error = error;
    apr_thread_mutex_unlock(shared.lock);
}

/* Loads path's shared image when its stamp matches. Returns 0 when there is
 * none; otherwise 1 with *proc set, or *err set if the file does not compile. */
static int image_lookup(mrb_state *mrb, const char *path, const mm_stamp_t *stamp, apr_pool_t *p,
                        struct RProc **proc, const char **err)
{
    mm_image_t *im;
    int found = 0;

    apr_thread_mutex_lock(shared.lock);
    im = apr_hash_get(shared.images, path, APR_HASH_KEY_STRING);
    if (im && stamp_eq(&im->stamp, stamp)) {
        found = 1;
        if (im->bin) {
            char why[MM_LOAD_WHY];

            *proc = load(mrb, im->bin, im->bin_len, 0, why, sizeof why);
            if (*proc == NULL) {
                *err = apr_psprintf(p, "%s: %s", path, why);
            }
        } else {
            *err = apr_pstrdup(p, im->error);
        }
    }
    apr_thread_mutex_unlock(shared.lock);
    return found;
}

static uint8_t *copy_to_malloc(const void *src, size_t len)
{
    uint8_t *dst = malloc(len ? len : 1);

    if (dst) {
        memcpy(dst, src, len);
    }
    return dst;
}

/* Reads and compiles a file script in mrb, and publishes the image for the
 * other threads. */
static struct RProc *compile_file(mrb_state *mrb, server_rec *s, const char *path, apr_pool_t *p,
                                  mm_stamp_t *stamp, const char **err)
{
    apr_finfo_t fi;
    char *src;
    apr_size_t len;
    struct RProc *proc;
    uint8_t *bin = NULL;
    size_t bin_len = 0;

    *err = read_file(path, p, &src, &len, &fi);
    if (*err) {
        return NULL; /* not published: the file may appear later */
    }
    stamp_of(stamp, &fi);
    if (is_rite(src, len)) {
        char why[MM_LOAD_WHY];

        proc = load(mrb, (const uint8_t *)src, len, 1, why, sizeof why);
        if (proc == NULL) {
            *err = apr_psprintf(p, "%s: %s", path, why);
        } else {
            bin = copy_to_malloc(src, len);
            bin_len = len;
        }
    } else {
        mm_compile_t c = {.name = path, .label = path, .src = src, .len = len, .lineno = 1, .dump = 1};

        proc = compile(mrb, &c);
        if (!c.limit) {
            warn_if_too_long(s, path, &c);
        }
        if (proc == NULL) {
            *err = apr_pstrdup(p, c.error);
        } else {
            bin = copy_to_malloc(c.bin, c.bin_len);
            bin_len = c.bin_len;
            mrb_free(mrb, c.bin);
        }
    }
    if (proc && bin == NULL) {
        return proc; /* out of memory for the copy: just don't share it */
    }
    image_publish(path, stamp, bin, bin_len, proc ? NULL : strdup(*err));
    return proc;
}

/* ---------------------------------------------------- eval of strings */

/* Parses (and throws away) what a script gives eval, under the limits of
 * mrubyCompileLimit, and raises ScriptError when it is over them. The
 * string is parsed twice then, so short ones, which cannot be slow, are
 * only measured. */
static void check_eval(mrb_state *mrb, const char *what, mrb_value src)
{
    const char *text = RSTRING_PTR(src);
    mrb_int len = RSTRING_LEN(src);
    mrbc_context *cxt;
    struct mrb_parser_state *ps;
    mm_feed_t feed;
    FILE *in;

    if ((apr_size_t)len > mm_settings.compile_bytes) {
        mrb_raisef(mrb, E_SCRIPT_ERROR, "%s: %i bytes of Ruby, over the %i that mrubyCompileLimit allows",
                   what, len, (mrb_int)mm_settings.compile_bytes);
    }
    if (len < MM_EVAL_CHECK_BYTES || mm_settings.compile_ms == 0) {
        return;
    }
    cxt = mrbc_context_new(mrb);
    cxt->capture_errors = TRUE; /* its syntax errors are eval's to report */
    in = feed_open(&feed, text, (size_t)len);
    if (in == NULL) {
        mrbc_context_free(mrb, cxt);
        return;
    }
    ps = mrb_parse_file(mrb, in, cxt);
    if (ps) {
        mrb_parser_free(ps);
    }
    fclose(in);
    mrbc_context_free(mrb, cxt);
    if (feed.stopped) {
        mrb_raisef(mrb, E_SCRIPT_ERROR,
                   "%s: compiling stopped after %i ms of CPU time, near line %i of the string; see "
                   "mrubyCompileLimit",
                   what, (mrb_int)mm_settings.compile_ms, (mrb_int)feed_line(&feed, 1));
    }
}

/* Calls the method mruby defined, kept under the name orig, as a C
 * function in the caller's own frame: eval runs the string in the frame
 * that called it, which a call through mrb_funcall would replace. */
static mrb_value eval_guarded(mrb_state *mrb, mrb_value self, const char *what, const char *orig)
{
    mrb_int argc = mrb_get_argc(mrb);
    const mrb_value *argv = mrb_get_argv(mrb);
    struct RClass *c = mrb_class(mrb, self);
    mrb_method_t m;
    mrb_func_t f;

    if (argc > 0 && mrb_string_p(argv[0])) {
        check_eval(mrb, what, argv[0]);
    }
    m = mrb_method_search_vm(mrb, &c, mrb_intern_cstr(mrb, orig));
    f = MRB_METHOD_UNDEF_P(m) ? NULL : MRB_METHOD_CFUNC(m);
    if (f == NULL) {
        mrb_raisef(mrb, E_NOMETHOD_ERROR, "%s: mruby's method is gone", what);
    }
    return f(mrb, self);
}

static mrb_value eval_kernel(mrb_state *mrb, mrb_value self)
{
    return eval_guarded(mrb, self, "eval", "__mm_eval");
}

static mrb_value eval_instance(mrb_state *mrb, mrb_value self)
{
    return eval_guarded(mrb, self, "instance_eval", "__mm_instance_eval");
}

static mrb_value eval_class(mrb_state *mrb, mrb_value self)
{
    return eval_guarded(mrb, self, "class_eval", "__mm_class_eval");
}

static mrb_value eval_module(mrb_state *mrb, mrb_value self)
{
    return eval_guarded(mrb, self, "module_eval", "__mm_module_eval");
}

/* Puts eval_NAME in front of mruby's method name of c: mruby's is kept as
 * orig. Nothing when mruby has no such method (no mruby-eval). */
static void guard(mrb_state *mrb, struct RClass *c, const char *name, const char *orig, mrb_func_t f)
{
    struct RClass *found = c;
    mrb_method_t m = mrb_method_search_vm(mrb, &found, mrb_intern_cstr(mrb, name));

    if (MRB_METHOD_UNDEF_P(m) || found != c || MRB_METHOD_CFUNC(m) == NULL) {
        return;
    }
    mrb_alias_method(mrb, c, mrb_intern_cstr(mrb, orig), mrb_intern_cstr(mrb, name));
    mrb_define_method(mrb, c, name, f, MRB_ARGS_ANY());
}

void mm_code_guard_eval(mrb_state *mrb)
{
    struct RClass *basic = mrb_class_get(mrb, "BasicObject");

    guard(mrb, mrb->kernel_module, "eval", "__mm_eval", eval_kernel);
    guard(mrb, mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(mrb->kernel_module))), "eval",
          "__mm_eval", eval_kernel);
    guard(mrb, basic, "instance_eval", "__mm_instance_eval", eval_instance);
    guard(mrb, mrb->module_class, "class_eval", "__mm_class_eval", eval_class);
    guard(mrb, mrb->module_class, "module_eval", "__mm_module_eval", eval_module);
}

/* ------------------------------------------------------------ request time */

/* Makes proc the VM's current version of a loaded script. */
static void keep_loaded(mm_vm_t *vm, mm_loaded_t *l, struct RProc *proc)
{
    if (l->proc) {
        mrb_gc_unregister(vm->mrb, mrb_obj_value(l->proc));
    }
    if (l->block) {
        mrb_gc_unregister(vm->mrb, mrb_obj_value(l->block));
        l->block = NULL;
    }

    mrb_gc_register(vm->mrb, mrb_obj_value(proc));
    l->proc = proc;
    /* A script that names Async can sleep with Apache::Async.sleep, one
     * that names HTTP, Socket or Redis can wait for a service by sleeping:
     * they run in a fiber. (One that reaches them through a method defined
     * elsewhere does from its second run in the VM on: rb_async.c.) */
    {
        static const char *const names[] = {"Async", "HTTP", "Socket", "Redis"};
        const mrb_irep *irep = mm_mi_proc_irep(proc);
        size_t i;

        l->may_suspend = 0;
        for (i = 0; i < sizeof names / sizeof names[0] && !l->may_suspend; i++) {
            l->may_suspend = mm_mi_irep_names(irep, mrb_intern_cstr(vm->mrb, names[i]));
        }
    }
}

/* A VM's file scripts by path: a table of chained entries in malloc'd
 * memory, not in the VM's APR pool, whose first block is 8 KiB (most VMs
 * load a file or two, and make the pool for nothing else). The entries do
 * not move: the harness keeps pointers to them across a run. */
typedef struct file_entry {
    struct file_entry *next;
    unsigned int hash;
    mm_loaded_t l;
    char path[];
} file_entry_t;

struct mm_files {
    unsigned int count, mask; /* mask + 1 buckets, a power of two */
    file_entry_t **buckets;
};

#define MM_FILES_FIRST 8 /* buckets of a new table; doubled past one entry a bucket */

static unsigned int path_hash(const char *path)
{
    apr_ssize_t len = APR_HASH_KEY_STRING;

    return apr_hashfunc_default(path, &len);
}

static mm_loaded_t *files_get(const struct mm_files *files, const char *path)
{
    unsigned int hash = path_hash(path);
    const file_entry_t *e;

    for (e = files ? files->buckets[hash & files->mask] : NULL; e; e = e->next) {
        if (e->hash == hash && strcmp(e->path, path) == 0) {
            return (mm_loaded_t *)&e->l;
        }
    }
    return NULL;
}

/* Doubles the buckets; on failure the table stays as it was (only longer
 * chains). */
static void files_grow(struct mm_files *files)
{
    unsigned int n = (files->mask + 1) * 2, i;
    file_entry_t **buckets = calloc(n, sizeof *buckets), *e, *next;

    if (buckets == NULL) {
        return;
    }
    for (i = 0; i <= files->mask; i++) {
        for (e = files->buckets[i]; e; e = next) {
            next = e->next;
            e->next = buckets[e->hash & (n - 1)];
            buckets[e->hash & (n - 1)] = e;
        }
    }
    free(files->buckets);
    files->buckets = buckets;
    files->mask = n - 1;
}

/* A new, empty entry for path; NULL if out of memory. */
static mm_loaded_t *files_add(mm_vm_t *vm, const char *path)
{
    struct mm_files *files = vm->files;
    size_t len = strlen(path);
    file_entry_t *e;

    if (files == NULL) {
        if ((files = calloc(1, sizeof *files)) == NULL ||
            (files->buckets = calloc(MM_FILES_FIRST, sizeof *files->buckets)) == NULL) {
            free(files);
            return NULL;
        }
        files->mask = MM_FILES_FIRST - 1;
        vm->files = files;
    }
    if ((e = calloc(1, sizeof *e + len + 1)) == NULL) {
        return NULL;
    }
    memcpy(e->path, path, len + 1);
    e->hash = path_hash(path);
    e->next = files->buckets[e->hash & files->mask];
    files->buckets[e->hash & files->mask] = e;
    if (++files->count > files->mask + 1) {
        files_grow(files);
    }
    return &e->l;
}

void mm_code_files_free(mm_vm_t *vm)
{
    struct mm_files *files = vm->files;
    file_entry_t *e, *next;
    unsigned int i;

    if (files == NULL) {
        return;
    }
    for (i = 0; i <= files->mask; i++) {
        for (e = files->buckets[i]; e; e = next) {
            next = e->next;
            free(e);
        }
    }
    free(files->buckets);
    free(files);
    vm->files = NULL;
}

mm_loaded_t *mm_code_file_proc(mm_vm_t *vm, server_rec *s, const char *path, const apr_finfo_t *finfo,
                               apr_pool_t *p, const char **err)
{
    mm_stamp_t now, got;
    mm_loaded_t *l = files_get(vm->files, path);
    struct RProc *proc = NULL;

    stamp_of(&now, finfo);
    if (l && stamp_eq(&l->stamp, &now)) {
        mm_ctr_add(vm->ctr, MM_CTR_CODE_HITS, 1);
        return l;
    }
    got = now;
    *err = NULL;
    if (image_lookup(vm->mrb, path, &now, p, &proc, err)) {
        mm_ctr_add(vm->ctr, MM_CTR_CODE_LOADS, proc != NULL);
    } else {
        proc = compile_file(vm->mrb, s, path, p, &got, err);
        mm_ctr_add(vm->ctr, MM_CTR_CODE_COMPILES, 1);
    }
    if (proc == NULL) {
        return NULL;
    }
    if (l == NULL && (l = files_add(vm, path)) == NULL) {
        *err = "out of memory";
        return NULL;
    }
    keep_loaded(vm, l, proc);
    l->stamp = got;
    return l;
}

mm_loaded_t *mm_code_script_proc(mm_vm_t *vm, server_rec *s, const mm_script_t *script, apr_pool_t *p,
                                 const char **err)
{
    mm_loaded_t *l;
    struct RProc *proc;

    if (script->reload) {
        apr_finfo_t fi;
        apr_status_t rv = apr_stat(&fi, script->path, APR_FINFO_MIN | APR_FINFO_IDENT, p);

        if (rv != APR_SUCCESS && rv != APR_INCOMPLETE) {
            *err = apr_psprintf(p, "cannot stat %s: %pm", script->path, &rv);
            return NULL;
        }
        return mm_code_file_proc(vm, s, script->path, &fi, p, err);
    }
    if (script->id >= vm->nloaded) {
        *err = apr_psprintf(p, "%s: unknown script (configured after this VM was made)", script->name);
        return NULL;
    }
    l = &vm->loaded[script->id];
    if (l->proc) {
        mm_ctr_add(vm->ctr, MM_CTR_CODE_HITS, 1);
    } else {
        char why[MM_LOAD_WHY];

        proc = load(vm->mrb, script->bin, script->bin_len, 0, why, sizeof why);
        if (proc == NULL) {
            *err = apr_psprintf(p, "%s: %s", script->name, why);
            return NULL;
        }
        keep_loaded(vm, l, proc);
        mm_ctr_add(vm->ctr, MM_CTR_CODE_LOADS, 1);
    }
    return l;
}

/* ------------------------------------------------------ configuration time */

/* The images pool is going: free the malloc'd images it indexes. */
static apr_status_t images_cleanup(void *unused)
{
    apr_hash_index_t *hi;

    for (hi = apr_hash_first(NULL, shared.images); hi; hi = apr_hash_next(hi)) {
        mm_image_t *im = apr_hash_this_val(hi);

        free(im->bin);
        free(im->error);
    }
    memset(&shared, 0, sizeof shared);
    return APR_SUCCESS;
}

static apr_status_t config_vm_cleanup(void *unused)
{
    mm_code_post_config();
    return APR_SUCCESS;
}

void mm_code_pre_config(apr_pool_t *pconf)
{
    apr_allocator_t *alloc;

    script_count = 0;
    apr_allocator_create(&alloc);
    apr_pool_create_ex(&shared.pool, pconf, NULL, alloc);
    apr_allocator_owner_set(alloc, shared.pool);
    apr_pool_tag(shared.pool, "mod_mruby_images");
    apr_thread_mutex_create(&shared.lock, APR_THREAD_MUTEX_DEFAULT, shared.pool);
    shared.images = apr_hash_make(shared.pool);
    apr_pool_cleanup_register(shared.pool, NULL, images_cleanup, apr_pool_cleanup_null);
    apr_pool_cleanup_register(pconf, NULL, config_vm_cleanup, apr_pool_cleanup_null);
}

void mm_code_post_config(void)
{
    if (config_mrb) {
        mrb_close(config_mrb);
        config_mrb = NULL;
    }
}

int mm_code_script_count(void)
{
    return script_count;
}

static mrb_state *config_vm(void)
{
    if (config_mrb == NULL) {
        /* The compiler needs no gems: a core-only state is enough. */
        config_mrb = mrb_open_core(mrb_default_allocf, NULL);
    }
    return config_mrb;
}

/* Compiles src (for a directive) into a pconf image for s. Only a file
 * may hold bytecode: a directive's argument is text, and inline code is
 * always Ruby. */
static const char *compile_for_config(cmd_parms *cmd, mm_script_t *s, const char *name, const char *src,
                                      apr_size_t len, int lineno, int file)
{
    mrb_state *mrb = config_vm();
    mm_compile_t c = {.name = name, .label = s->name, .src = src, .len = len, .lineno = lineno, .dump = 1};
    int ai;

    if (mrb == NULL) {
        return apr_psprintf(cmd->pool, "%s: cannot create an mruby state", cmd->cmd->name);
    }
    ai = mrb_gc_arena_save(mrb);
    if (file && is_rite(src, len)) {
        char why[MM_LOAD_WHY];

        if (load(mrb, (const uint8_t *)src, len, 1, why, sizeof why) == NULL) {
            mrb_gc_arena_restore(mrb, ai);
            return apr_psprintf(cmd->pool, "%s: %s: %s", cmd->cmd->name, name, why);
        }
        s->bin = apr_pmemdup(cmd->pool, src, len);
        s->bin_len = len;
    } else {
        struct RProc *proc = compile(mrb, &c);

        if (!c.limit) {
            warn_if_too_long(cmd->server, s->name, &c);
        }
        if (proc == NULL) {
            mrb_gc_arena_restore(mrb, ai);
            return apr_psprintf(cmd->pool, c.limit ? "%s: %s" : "%s: Ruby error: %s", cmd->cmd->name,
                                c.error);
        }
        s->bin = apr_pmemdup(cmd->pool, c.bin, c.bin_len);
        s->bin_len = c.bin_len;
        mrb_free(mrb, c.bin);
    }
    mrb_gc_arena_restore(mrb, ai);
    return NULL;
}

const char *mm_code_inline(cmd_parms *cmd, const char *code, const mm_script_t **out)
{
    mm_script_t *s = apr_pcalloc(cmd->pool, sizeof *s);
    const char *file = cmd->directive ? cmd->directive->filename : cmd->config_file->name;
    int line = cmd->directive ? cmd->directive->line_num : (int)cmd->config_file->line_number;
    const char *err;

    /* Ruby line numbers count from the directive's line, so backtraces point
     * into the configuration file itself. */
    s->name = apr_psprintf(cmd->pool, "%s:%d", file, line);
    err = compile_for_config(cmd, s, file, code, strlen(code), line, 0);
    if (err) {
        return err;
    }
    s->id = script_count++;
    *out = s;
    return NULL;
}

const char *mm_code_file(cmd_parms *cmd, const char *path, int cache, const mm_script_t **out)
{
    mm_script_t *s = apr_pcalloc(cmd->pool, sizeof *s);
    apr_finfo_t fi;
    char *src;
    apr_size_t len;
    const char *err = read_file(path, cmd->temp_pool, &src, &len, &fi);

    if (err) {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    s->name = s->path = apr_pstrdup(cmd->pool, path);
    err = compile_for_config(cmd, s, path, src, len, 1, 1);
    if (err) {
        return err;
    }
    if (!cache) {
        /* Seed the shared table so children start from this compilation; the
         * image in s is not used, the file is checked on every request. */
        mm_stamp_t stamp;
        uint8_t *bin = copy_to_malloc(s->bin, s->bin_len);

        stamp_of(&stamp, &fi);
        if (bin) {
            image_publish(s->path, &stamp, bin, s->bin_len, NULL);
        }
        s->reload = 1;
        s->bin = NULL;
        s->bin_len = 0;
    }
    s->id = script_count++;
    *out = s;
    return NULL;
}

/* A fiber runs a block, and takes its self from the block's environment
 * when it first runs; a script's top-level proc has no environment. So a
 * script that runs in fibers gets, once per VM, a block of the same code
 * whose closed environment holds the top-level self (and an empty block
 * slot), kept from the collector while the script is the VM's. */
struct RProc *mm_code_fiber_block(mm_vm_t *vm, mm_loaded_t *l)
{
    mrb_state *mrb = vm->mrb;
    struct RProc *block;

    if (l->block) {
        return l->block;
    }
    block = mm_mi_toplevel_block(mrb, l->proc);
    mrb_gc_register(mrb, mrb_obj_value(block));
    l->block = block;
    return block;
}
