/* binding.h: what the Ruby class bindings share: the init list, access to
 * the current run, and request-bound wrapper objects. */
#ifndef MM_BINDING_H
#define MM_BINDING_H

#include "httpd.h"

#include <mruby.h>

#include "run.h"

/* Defines the Ruby API in a fresh VM: each class's init in order, then the
 * Ruby half of the API (mrbgems/mruby-apache). */
void mm_binding_init(mrb_state *mrb);

/* An outermost run leaves its VM (it ended, or sleeps): what the classes
 * keep of the request in the VM is forgotten (binding.c lists who). */
void mm_binding_leave(mm_vm_t *vm);

/* A run was stopped hard (mrubyTimeout), past the C frames of the methods
 * it was in: what they held is let go (binding.c lists who). Called in the
 * thread that ran the script. */
void mm_binding_stopped(mm_run_t *run);

/* The request's tables, as Ruby sees them (rb_table.c). */
typedef enum {
    MM_TABLE_HEADERS_IN,
    MM_TABLE_HEADERS_OUT,
    MM_TABLE_ERR_HEADERS_OUT,
    MM_TABLE_NOTES,
    MM_TABLE_ENV, /* subprocess_env: Apache::Env */
    MM_TABLE_COUNT
} mm_table_kind_e;

/* The run in progress; raises if a request is needed and there is none
 * (a method called at load time or in a server phase). */
mm_run_t *mm_binding_run(mrb_state *mrb, const char *what);
request_rec *mm_binding_request(mrb_state *mrb, const char *what);

/* Request-bound objects (Apache::Request, the tables) carry the serial of
 * the run that made them plus a small tag (which table). Using one after its
 * request ended raises instead of touching freed memory. */
#define MM_TAG_BITS 4
mrb_value mm_binding_wrap(mrb_state *mrb, struct RClass *cls, unsigned int tag);
request_rec *mm_binding_unwrap(mrb_state *mrb, mrb_value self, unsigned int *tag);
/* The same for objects that need a run but no request (Apache::Server is
 * also usable in server phases). */
mrb_value mm_binding_wrap_run(mrb_state *mrb, struct RClass *cls, unsigned int tag);
mm_run_t *mm_binding_unwrap_run(mrb_state *mrb, mrb_value self, unsigned int *tag);

/* A Ruby String copied into pool as a C string; raises TypeError for a
 * non-String and ArgumentError for an embedded NUL. */
char *mm_binding_pstr(mrb_state *mrb, apr_pool_t *pool, mrb_value str, const char *what);
/* The same, also refusing CR, LF and the other control characters but HTAB
 * (values that end up in a header). */
char *mm_binding_header_str(mrb_state *mrb, apr_pool_t *pool, mrb_value str, const char *what);

/* Raises Apache::HTTPError: if the script does not rescue it, the phase
 * answers status (run.c reads it back with mm_binding_exception_status). */
void mm_binding_raise_status(mrb_state *mrb, int status, const char *msg);
int mm_binding_exception_status(mrb_state *mrb, mrb_value exc);

/* The script file and line that called the running C method; 0 if none. */
int mm_binding_caller(mrb_state *mrb, const char **file, int *line);

/* Logs msg (any String; escaped) at level, tagged with the calling script's
 * file:line; to r's log when r is given, else to s's. */
void mm_binding_log(mrb_state *mrb, request_rec *r, server_rec *s, mrb_int level, mrb_value msg);

/* The most of a script's text that goes into one log entry: httpd writes
 * no longer an entry (MAX_STRING_LEN), nor do syslog daemons. Text from a
 * script may be any size: only this much of it is copied and escaped. */
#define MM_LOG_TEXT_MAX 8192

/* The first MM_LOG_TEXT_MAX bytes of data, made printable for a log (see
 * binding.c), allocated from p. */
const char *mm_binding_log_text(apr_pool_t *p, const char *data, size_t len, int all);

/* Table-driven methods: MM_INDEXED_FUNCS(fn) makes fn_at[i] (i < 32), a
 * plain C method that calls fn(mrb, self, i); MM_INDEXED_FUNCS8(fn) the
 * same for i < 8. The index is not kept in the method's environment (a C
 * Proc with an REnv): that cost every VM two objects and a block per
 * method, these cost it nothing but a method-table entry (docs/benchmarks.md,
 * "Where a VM's memory goes"). */
/* (clang-format formats these lists differently at each pass: left as is) */
/* clang-format off */
#define MM_INDEXED_8(X, fn) X(fn, 0) X(fn, 1) X(fn, 2) X(fn, 3) X(fn, 4) X(fn, 5) X(fn, 6) X(fn, 7)
#define MM_INDEXED_32(X, fn) \
    X(fn, 0) X(fn, 1) X(fn, 2) X(fn, 3) X(fn, 4) X(fn, 5) X(fn, 6) X(fn, 7) \
    X(fn, 8) X(fn, 9) X(fn, 10) X(fn, 11) X(fn, 12) X(fn, 13) X(fn, 14) X(fn, 15) \
    X(fn, 16) X(fn, 17) X(fn, 18) X(fn, 19) X(fn, 20) X(fn, 21) X(fn, 22) X(fn, 23) \
    X(fn, 24) X(fn, 25) X(fn, 26) X(fn, 27) X(fn, 28) X(fn, 29) X(fn, 30) X(fn, 31)
/* clang-format on */
#define MM_INDEXED_FN(fn, i)                                                                                 \
    static mrb_value fn##_##i(mrb_state *mrb, mrb_value self)                                                \
    {                                                                                                        \
        return fn(mrb, self, i);                                                                             \
    }
#define MM_INDEXED_REF(fn, i) fn##_##i,
#define MM_INDEXED_MAX        32
#define MM_INDEXED_FUNCS(fn)                                                                                 \
    MM_INDEXED_32(MM_INDEXED_FN, fn)                                                                         \
    static const mrb_func_t fn##_at[MM_INDEXED_MAX] = {MM_INDEXED_32(MM_INDEXED_REF, fn)}
#define MM_INDEXED_FUNCS8(fn)                                                                                \
    MM_INDEXED_8(MM_INDEXED_FN, fn)                                                                          \
    static const mrb_func_t fn##_at[8] = {MM_INDEXED_8(MM_INDEXED_REF, fn)}

/* Defines Apache::Request#name, returning an object of cls (a wrapper with
 * the given tag) bound to the same request. Apache::Request must exist.
 * cls and tag are kept in one of the VM's binding slots (vm.h), cls also
 * from the collector. */
void mm_binding_define_reader(mrb_state *mrb, const char *name, struct RClass *cls, unsigned int tag);

/* Defines Apache::<name>, whose objects are wrappers (above), with a `new`
 * that binds one to the current request (needs_request) or run. */
struct RClass *mm_binding_define_wrapper_class(mrb_state *mrb, const char *name, int needs_request);

/* A class whose objects exist only in scripts of one or two kinds (a
 * filter's output and input): Apache::Filter, AuthnProvider,
 * AuthzProvider. Its objects are wrappers, and the run's data (mm_run_t.data)
 * is what they describe. */
typedef struct {
    const char *name;        /* under Apache: "Filter" */
    const char *where;       /* for messages: "filter scripts" */
    const mm_phase_t *a, *b; /* the kinds (b may equal a) */
} mm_kind_class_t;

/* Defines Apache::<k->name> (k is static): its `new` raises outside a run of
 * kind a or b, else binds an object to the run. */
struct RClass *mm_binding_define_kind_class(mrb_state *mrb, const mm_kind_class_t *k);
/* The run's data for an object of such a class; raises for an object kept
 * from an earlier run. */
void *mm_binding_kind_object_data(mrb_state *mrb, mrb_value self);

/* A C string as a new String; nil for NULL. */
mrb_value mm_binding_str_or_nil(mrb_state *mrb, const char *s);

/* The Apache class (defined by mm_apache_init). */
struct RClass *mm_binding_apache(mrb_state *mrb);

#endif
