/* binding.c: the init order of the Ruby API and the helpers every class
 * binding uses to reach the current request safely. */

#include "apr_strings.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/irep.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <string.h>

#include "binding.h"
#include "classes.h"
#include "json.h"
#include "mod_mruby.h"
#include "mruby_internal.h"
#include "parse.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

/* The Ruby half of the API, compiled by mrbc at build time, unless the gem
 * is part of libmruby (the mruby source build). */
#ifndef MM_MRBLIB_IN_LIBMRUBY
extern const uint8_t mm_mrblib_irep[];
#endif

/* Apache first: every other class is nested in it; then Apache::Request,
 * on which the classes after it define their readers (r.headers_out,
 * r.connection, ...). One line each, so that additions merge cleanly. */
/* clang-format off */
static void (*const class_inits[])(mrb_state *) = {
    mm_apache_init,
    mm_request_init,
    mm_table_init,
    mm_async_init,
    mm_timer_init,
    mm_input_init,
    mm_params_init,
    mm_connection_init,
    mm_ssl_init,
    mm_server_init,
    mm_scoreboard_init,
    mm_status_init,
    mm_finfo_init,
    mm_regexp_init,
    mm_cache_init,
    mm_filter_init,
    mm_authn_init,
    mm_authz_init,
    mm_json_init,
    mm_openssl_init,
    mm_digest_init,
    mm_base64_init,
    mm_random_init,
    mm_pkey_init,
    mm_env_init,
    mm_http_init,
    mm_subrequest_init,
    mm_socket_init,
    mm_redis_init,
    mm_code_guard_eval,
};
/* clang-format on */

/* What classes do when a run leaves the VM, or is stopped hard. */
static void (*const on_leave[])(mm_vm_t *) = {
    mm_regexp_forget,
};
static void (*const on_stop[])(mm_run_t *) = {
    mm_cache_release_held,
};

void mm_binding_leave(mm_vm_t *vm)
{
    size_t i;

    for (i = 0; i < sizeof on_leave / sizeof on_leave[0]; i++) {
        on_leave[i](vm);
    }
}

void mm_binding_stopped(mm_run_t *run)
{
    size_t i;

    for (i = 0; i < sizeof on_stop / sizeof on_stop[0]; i++) {
        on_stop[i](run);
    }
}

void mm_binding_init(mrb_state *mrb)
{
    size_t i;

    for (i = 0; i < sizeof class_inits / sizeof class_inits[0]; i++) {
        class_inits[i](mrb);
    }
#ifndef MM_MRBLIB_IN_LIBMRUBY
    mrb_load_irep(mrb, mm_mrblib_irep);
#endif
}

struct RClass *mm_binding_apache(mrb_state *mrb)
{
    return mrb_class_get(mrb, "Apache");
}

static mrb_value wrapper_new(mrb_state *mrb, mrb_value klass)
{
    return mm_binding_wrap(mrb, mrb_class_ptr(klass), 0);
}

static mrb_value run_wrapper_new(mrb_state *mrb, mrb_value klass)
{
    return mm_binding_wrap_run(mrb, mrb_class_ptr(klass), 0);
}

/* Apache::<name>, whose objects are wrappers; its `new` is the caller's. */
static struct RClass *wrapper_class(mrb_state *mrb, const char *name)
{
    struct RClass *c = mrb_define_class_under(mrb, mm_binding_apache(mrb), name, mrb->object_class);

    MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
    return c;
}

struct RClass *mm_binding_define_wrapper_class(mrb_state *mrb, const char *name, int needs_request)
{
    struct RClass *c = wrapper_class(mrb, name);

    mrb_define_class_method(mrb, c, "new", needs_request ? wrapper_new : run_wrapper_new, MRB_ARGS_NONE());
    return c;
}

mm_run_t *mm_binding_run(mrb_state *mrb, const char *what)
{
    mm_run_t *run = mm_vm_of(mrb)->run;

    if (run == NULL) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s can only be used while a request or phase runs", what);
    }
    return run;
}

request_rec *mm_binding_request(mrb_state *mrb, const char *what)
{
    mm_run_t *run = mm_binding_run(mrb, what);

    if (run->r == NULL) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s needs a request, and the %s phase has none", what,
                   run->kind->stem);
    }
    return run->r;
}

/* A new binding slot of the VM (vm.h). */
static int new_slot(mrb_state *mrb, struct RClass *cls, unsigned int tag, const void *data)
{
    mm_vm_t *vm = mm_vm_of(mrb);
    struct mm_binding_slot *slot;

    if (vm->nslots >= MM_BINDING_SLOTS) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "mod_mruby: more binding slots than MM_BINDING_SLOTS");
    }
    slot = &vm->slots[vm->nslots];
    slot->cls = cls;
    slot->tag = tag;
    slot->data = data;
    return vm->nslots++;
}

/* Apache::<kind class>.new: the class's mm_kind_class_t is in the slot. */
static mrb_value kind_new(mrb_state *mrb, mrb_value klass, int slot)
{
    const mm_kind_class_t *k = mm_vm_of(mrb)->slots[slot].data;
    const mm_run_t *run = mm_vm_of(mrb)->run;

    if (run == NULL || (run->kind != k->a && run->kind != k->b)) {
        /* the class's name only for the error */
        const char *what = mrb_class_name(mrb, mrb_class_ptr(klass));

        run = mm_binding_run(mrb, what); /* raises without a run */
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s can only be used in %s, not in a %s script", what, k->where,
                   run->kind->stem);
    }
    return mm_binding_wrap(mrb, mrb_class_ptr(klass), 0);
}
MM_INDEXED_FUNCS(kind_new);

struct RClass *mm_binding_define_kind_class(mrb_state *mrb, const mm_kind_class_t *k)
{
    struct RClass *c = wrapper_class(mrb, k->name);

    mrb_define_class_method(mrb, c, "new", kind_new_at[new_slot(mrb, NULL, 0, k)], MRB_ARGS_ANY());
    return c;
}

void *mm_binding_kind_object_data(mrb_state *mrb, mrb_value self)
{
    mm_binding_unwrap(mrb, self, NULL);
    return mm_vm_of(mrb)->run->data;
}

mrb_value mm_binding_str_or_nil(mrb_state *mrb, const char *s)
{
    return s ? mrb_str_new_cstr(mrb, s) : mrb_nil_value();
}

/* Wrapper objects hold no pointer, only (serial << MM_TAG_BITS | tag). */
static const mrb_data_type wrap_type = {"mod_mruby request object", NULL};

mrb_value mm_binding_wrap_run(mrb_state *mrb, struct RClass *cls, unsigned int tag)
{
    mm_run_t *run = mm_vm_of(mrb)->run;
    uintptr_t word;

    if (run == NULL) { /* the class's name only for the error */
        run = mm_binding_run(mrb, mrb_class_name(mrb, cls));
    }
    word = ((uintptr_t)run->serial << MM_TAG_BITS) | tag;

    return mrb_obj_value(mrb_data_object_alloc(mrb, cls, (void *)word, &wrap_type));
}

mrb_value mm_binding_wrap(mrb_state *mrb, struct RClass *cls, unsigned int tag)
{
    const mm_run_t *run = mm_vm_of(mrb)->run;

    if (run == NULL || run->r == NULL) {
        mm_binding_request(mrb, mrb_class_name(mrb, cls)); /* raises */
    }
    return mm_binding_wrap_run(mrb, cls, tag);
}

mm_run_t *mm_binding_unwrap_run(mrb_state *mrb, mrb_value self, unsigned int *tag)
{
    mm_run_t *run = mm_vm_of(mrb)->run;
    uintptr_t word = (uintptr_t)mrb_data_check_get_ptr(mrb, self, &wrap_type);
    uintptr_t mask = ((uintptr_t)1 << MM_TAG_BITS) - 1;

    if (word == 0) {
        mrb_raise(mrb, E_TYPE_ERROR, "not a mod_mruby request object");
    }
    if (run == NULL || (word >> MM_TAG_BITS) != (run->serial & (UINTPTR_MAX >> MM_TAG_BITS))) {
        mrb_raisef(
            mrb, E_RUNTIME_ERROR,
            "%s object used after its request ended (keep data, not request objects, between requests)",
            mrb_obj_classname(mrb, self));
    }
    if (tag) {
        *tag = (unsigned int)(word & mask);
    }
    return run;
}

request_rec *mm_binding_unwrap(mrb_state *mrb, mrb_value self, unsigned int *tag)
{
    mm_run_t *run = mm_binding_unwrap_run(mrb, self, tag);

    if (run->r == NULL) {
        mm_binding_request(mrb, mrb_obj_classname(mrb, self)); /* raises */
    }
    return run->r;
}

char *mm_binding_pstr(mrb_state *mrb, apr_pool_t *pool, mrb_value str, const char *what)
{
    if (!mrb_string_p(str)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "%s must be a String, not %s", what, mrb_obj_classname(mrb, str));
    }
    if (memchr(RSTRING_PTR(str), '\0', RSTRING_LEN(str))) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "%s must not contain a NUL byte", what);
    }
    return apr_pstrmemdup(pool, RSTRING_PTR(str), RSTRING_LEN(str));
}

char *mm_binding_header_str(mrb_state *mrb, apr_pool_t *pool, mrb_value str, const char *what)
{
    char *val = mm_binding_pstr(mrb, pool, str, what);

    if (!mm_parse_header_value_ok(val, strlen(val))) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "%s must not contain CR, LF or other control characters", what);
    }
    return val;
}

/* Apache::HTTPError carries the HTTP status the request gets if the
 * exception is not rescued (run.c asks for it). */
int mm_binding_exception_status(mrb_state *mrb, mrb_value exc)
{
    struct RClass *http_error = mm_vm_of(mrb)->http_error;
    mrb_value st;

    if (http_error == NULL || !mrb_obj_is_kind_of(mrb, exc, http_error)) {
        return 0;
    }
    st = mrb_iv_get(mrb, exc, mrb_intern_lit(mrb, "@status"));
    if (!mrb_fixnum_p(st) || mrb_fixnum(st) < 400 || mrb_fixnum(st) > 599) {
        return 0;
    }
    return (int)mrb_fixnum(st);
}

void mm_binding_raise_status(mrb_state *mrb, int status, const char *msg)
{
    struct RClass *cls = mm_vm_of(mrb)->http_error;
    mrb_value args[2];

    args[0] = mrb_fixnum_value(status);
    args[1] = mrb_str_new_cstr(mrb, msg);
    mrb_exc_raise(mrb, mrb_obj_new(mrb, cls, 2, args));
}

typedef struct {
    const char *file;
    int line;
} mm_place_t;

/* A frame of a script, not of the gem's Ruby half: its place is kept. */
static int script_frame(void *ud, const char *file, int line)
{
    mm_place_t *place = ud;

    if (strstr(file, "mruby-apache/mrblib/")) {
        return 0;
    }
    place->file = file;
    place->line = line;
    return 1;
}

/* The Ruby file:line that called the running C method: the innermost Ruby
 * frame of a script (outside the API's own Ruby half, so a helper of the gem
 * reports its caller's line, and outside mruby's, which has no file). */
int mm_binding_caller(mrb_state *mrb, const char **file, int *line)
{
    mm_place_t place;

    if (!mm_mi_each_frame(mrb, script_frame, &place)) {
        return 0;
    }
    *file = place.file;
    *line = place.line;
    return 1;
}

/* Text from a script as a C string for a log: a NUL byte (Ruby strings may
 * hold any byte) becomes \\x00; with `all`, so do the other bytes outside
 * printable ASCII and the backslash (httpd's error log escapes those
 * itself, syslog does not). */
const char *mm_binding_log_text(apr_pool_t *p, const char *data, size_t len, int all)
{
    static const char hex[] = "0123456789abcdef";
    char *out, *o;
    size_t i;

    if (len > MM_LOG_TEXT_MAX) {
        len = MM_LOG_TEXT_MAX;
    }
    out = o = apr_palloc(p, len * 4 + 1);

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];

        if (c == '\0' || (all && (c == '\\' || c < 0x20 || c >= 0x7f))) {
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        } else {
            *o++ = (char)c;
        }
    }
    *o = '\0';
    return out;
}

void mm_binding_log(mrb_state *mrb, request_rec *r, server_rec *s, mrb_int level, mrb_value msg)
{
    const char *file = NULL, *text;
    int line = 0;
    apr_pool_t *tmp = NULL, *p;

    if (level < APLOG_EMERG || level > APLOG_TRACE8) {
        /* the level as given: cut to an int, 2**32 + 4 would read 4 */
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "log level %i: use Apache::APLOG_EMERG .. APLOG_TRACE8", level);
    }
    if (!mrb_string_p(msg)) {
        msg = mrb_obj_as_string(mrb, msg);
    }
    if (r) {
        p = r->pool;
    } else {
        apr_pool_create(&tmp, NULL);
        p = tmp;
    }
    text = mm_binding_log_text(p, RSTRING_PTR(msg), (size_t)RSTRING_LEN(msg), 0);
    if (!mm_binding_caller(mrb, &file, &line)) {
        file = "-";
    }
    /* The script's file and line stand where httpd puts a module's source
     * position (ErrorLogFormat %F), and in the message itself. */
    if (r) {
        ap_log_rerror_(file, line, APLOG_MODULE_INDEX, (int)level, 0, r, MM_LOGNO(00400) "%s:%d: %s",
                       ap_escape_logitem(p, file), line, text);
    } else {
        ap_log_error_(file, line, APLOG_MODULE_INDEX, (int)level, 0, s, MM_LOGNO(00400) "%s:%d: %s",
                      ap_escape_logitem(p, file), line, text);
    }
    if (tmp) {
        apr_pool_destroy(tmp);
    }
}

/* A reader defined by mm_binding_define_reader: its class and tag are in
 * its slot. */
static mrb_value reader(mrb_state *mrb, mrb_value self, int slot)
{
    const struct mm_binding_slot *sl = &mm_vm_of(mrb)->slots[slot];

    mm_binding_unwrap(mrb, self, NULL); /* raises for an object of an ended request */
    return mm_binding_wrap_run(mrb, sl->cls, sl->tag);
}
MM_INDEXED_FUNCS(reader);

void mm_binding_define_reader(mrb_state *mrb, const char *name, struct RClass *cls, unsigned int tag)
{
    struct RClass *req = mrb_class_get_under(mrb, mm_binding_apache(mrb), "Request");

    /* the constant may go: the reader's class stays */
    mrb_gc_register(mrb, mrb_obj_value(cls));
    mrb_define_method(mrb, req, name, reader_at[new_slot(mrb, cls, tag, NULL)], MRB_ARGS_ANY());
}
