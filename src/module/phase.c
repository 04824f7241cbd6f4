/* phase.c: the httpd hook functions, made from the phase table (phase.h):
 * three per phase, one per hook position (First, Middle, Last), each from
 * the template of the phase's SHAPE. Only the hooks some configuration
 * uses are registered (mm_phase_use). */

#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_protocol.h"
#include "http_request.h"

#include "config.h"
#include "mod_mruby.h"
#include "run.h"
#include "timer.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

/* Which hook shapes produce the response. */
#define MM_FLAGS_REQUEST    0
#define MM_FLAGS_VOID       0
#define MM_FLAGS_QUICK      MM_KIND_CONTENT
#define MM_FLAGS_HANDLER    MM_KIND_CONTENT
#define MM_FLAGS_POSTCONFIG 0
#define MM_FLAGS_CHILDINIT  0
#define MM_FLAGS_CHILDEXIT  0
#define MM_FLAGS_TIMERS     0

const mm_phase_t mm_phases[MM_PHASE_COUNT] = {
#define MM_PHASE_ROW(ID, STEM, SHAPE, HOOK, WHERE, DEFAULT, ONERROR)                                         \
    {STEM, MM_WHERE_##WHERE, DEFAULT, ONERROR, MM_FLAGS_##SHAPE},
    MM_PHASES(MM_PHASE_ROW)
#undef MM_PHASE_ROW
};

/* ------------------------------------------------------- request phases */

/* The hook of a request phase is registered only when some section scripts
 * that phase and order (mm_phase_use): the request's sections may still
 * have none. */
static int run_request_phase(request_rec *r, mm_phase_e phase, mm_order_e order)
{
    const mm_dir_conf_t *dc = ap_get_module_config(r->per_dir_config, &mruby_module);
    const apr_array_header_t *scripts = mm_config_scripts(dc, phase, order);

    return scripts ? mm_run_scripts(r, &mm_phases[phase], scripts) : DECLINED;
}

/* ------------------------------------------------------- content handler */

/* True when the request was given a named handler other than ours
 * (SetHandler server-status, AddHandler cgi-script .cgi, ...): that handler
 * answers, not the section's scripts. A MIME type, which httpd puts in
 * r->handler when none was set, names no handler. */
static int other_handler(const char *h)
{
    return h && *h && strcmp(h, MM_HANDLER_NATIVE) != 0 && strchr(h, '/') == NULL;
}

/* AddHandler mruby-script .mrb: the requested file is the script. */
static int run_file_handler(request_rec *r)
{
    if (r->finfo.filetype == APR_NOFILE) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, MM_LOGNO(00040) "script not found: %s", r->filename);
        return HTTP_NOT_FOUND;
    }
    if (r->finfo.filetype != APR_REG) {
        return DECLINED;
    }
    return mm_run_file(r);
}

/* Some section scripts the handler phase (its Middle hook is there in any
 * case). Written only while the configuration is read. */
static int handler_scripted;

static int run_handler(request_rec *r, mm_phase_e phase, mm_order_e order)
{
    const mm_dir_conf_t *dc;
    const apr_array_header_t *scripts;
    int native;

    if (r->handler && strcmp(r->handler, MM_HANDLER_FILE) == 0) {
        return order == MM_ORDER_MIDDLE ? run_file_handler(r) : DECLINED;
    }
    native = r->handler && strcmp(r->handler, MM_HANDLER_NATIVE) == 0;
    if (!native && (!handler_scripted || other_handler(r->handler))) {
        return DECLINED;
    }
    dc = ap_get_module_config(r->per_dir_config, &mruby_module);
    scripts = mm_config_scripts(dc, phase, order);
    if (scripts) {
        return mm_run_scripts(r, &mm_phases[phase], scripts);
    }
    if (native && order == MM_ORDER_MIDDLE && dc->scripts[phase] == NULL) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                      MM_LOGNO(00041) "SetHandler " MM_HANDLER_NATIVE
                                      " but no mrubyHandler or mrubyHandlerCode applies to %s",
                      r->uri);
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return DECLINED;
}

/* --------------------------------------------------------- server phases */

/* Server-phase scripts are configured in the main server only. */
static const apr_array_header_t *server_scripts(server_rec *s, mm_phase_e phase, mm_order_e order)
{
    const mm_dir_conf_t *dc = ap_get_module_config(s->lookup_defaults, &mruby_module);

    return mm_config_scripts(dc, phase, order);
}

/* The parent's VM for PostConfig scripts: one per (re)start, closed with
 * ptemp once every module's post_config has run. */
static mm_vm_t *parent_vm;

static apr_status_t close_parent_vm(void *unused)
{
    if (parent_vm) {
        mm_vm_close(parent_vm);
        parent_vm = NULL;
    }
    return APR_SUCCESS;
}

static int run_post_config(apr_pool_t *ptemp, server_rec *s, mm_phase_e phase, mm_order_e order)
{
    const apr_array_header_t *scripts = server_scripts(s, phase, order);
    int result;

    /* httpd reads its configuration twice at startup: run once, for real. */
    if (scripts == NULL || ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    if (parent_vm == NULL) {
        parent_vm = mm_vm_create(s);
        if (parent_vm == NULL) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        apr_pool_cleanup_register(ptemp, NULL, close_parent_vm, apr_pool_cleanup_null);
    }
    result = mm_run_server_scripts(parent_vm, s, ptemp, &mm_phases[phase], scripts);
    if (result != OK && result != DECLINED) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, 0, s,
                     MM_LOGNO(00050) "a PostConfig script failed (%d): httpd does not start", result);
        return result;
    }
    return OK;
}

/* ChildInit scripts run once per child process, in its main thread's VM
 * (under prefork, the VM that then serves the child's requests). */
static void run_child_init(apr_pool_t *pchild, server_rec *s, mm_phase_e phase, mm_order_e order)
{
    const apr_array_header_t *scripts = server_scripts(s, phase, order);

    if (scripts) {
        mm_run_server_scripts(mm_vm_for_thread(s), s, pchild, &mm_phases[phase], scripts);
    }
}

/* ChildExit scripts run when the child's pool is destroyed: its worker
 * threads have ended (worker, event) or its one thread has left its
 * request loop (prefork), and every module's child_init cleanup is still
 * to come. A pre-cleanup, so the subpools of pchild (and what other modules
 * keep there) are still alive; pre-cleanups run before the cleanups of the
 * VM registry, the timeout watchdog and the caches, which the scripts may
 * need. They run in a VM of their own, made for the occasion and closed
 * after: the threads' VMs may be gone already, and the main thread's may
 * be in the middle of a run a signal cut short. One cleanup runs the
 * three orders, First to Last; the hooks of the three orders (whichever are
 * registered) arm it once per child. */
static int child_exit_armed;

static apr_status_t run_child_exit(void *data)
{
    server_rec *s = data;
    mm_vm_t *vm;
    mm_order_e order;
    apr_pool_t *p;

    child_exit_armed = 0;
    mm_timer_stop(); /* no timer runs beside or after the exit scripts */
    if (apr_pool_create_unmanaged_ex(&p, NULL, NULL) != APR_SUCCESS) {
        return APR_SUCCESS;
    }
    vm = mm_vm_create(s);
    if (vm) {
        for (order = MM_ORDER_FIRST; order < MM_ORDER_COUNT; order++) {
            const apr_array_header_t *scripts = server_scripts(s, MM_PHASE_CHILD_EXIT, order);

            if (scripts) {
                mm_run_server_scripts(vm, s, p, &mm_phases[MM_PHASE_CHILD_EXIT], scripts);
            }
        }
        mm_vm_close(vm);
    }
    apr_pool_destroy(p);
    return APR_SUCCESS;
}

static void arm_child_exit(apr_pool_t *pchild, server_rec *s, mm_phase_e phase, mm_order_e order)
{
    if (!child_exit_armed) {
        child_exit_armed = 1;
        apr_pool_pre_cleanup_register(pchild, s, run_child_exit);
    }
}

/* mrubyTimers scripts run in the child's timer thread, in its VM (timer.c),
 * all three orders, First to Last; the hooks of the three orders start the
 * thread once per child. */
static void run_timer_scripts(mm_vm_t *vm, server_rec *s, apr_pool_t *p)
{
    mm_order_e order;

    for (order = MM_ORDER_FIRST; order < MM_ORDER_COUNT; order++) {
        const apr_array_header_t *scripts = server_scripts(s, MM_PHASE_TIMERS, order);

        if (scripts) {
            mm_run_server_scripts(vm, s, p, &mm_phases[MM_PHASE_TIMERS], scripts);
        }
    }
}

static void start_timers(apr_pool_t *pchild, server_rec *s, mm_phase_e phase, mm_order_e order)
{
    mm_timer_kind = &mm_phases[MM_PHASE_TIMERS];
    mm_timer_child_init(pchild, s, run_timer_scripts);
}

/* ------------------------------------------------------- hook templates */

#define MM_ORDERS(MAKE, ID) MAKE(ID, first, FIRST) MAKE(ID, middle, MIDDLE) MAKE(ID, last, LAST)

#define MM_HOOK_REQUEST(ID, o, ORDER)                                                                        \
    static int hook_##ID##_##o(request_rec *r)                                                               \
    {                                                                                                        \
        return run_request_phase(r, MM_PHASE_##ID, MM_ORDER_##ORDER);                                        \
    }
#define MM_HOOK_VOID(ID, o, ORDER)                                                                           \
    static void hook_##ID##_##o(request_rec *r)                                                              \
    {                                                                                                        \
        run_request_phase(r, MM_PHASE_##ID, MM_ORDER_##ORDER);                                               \
    }
#define MM_HOOK_QUICK(ID, o, ORDER)                                                                          \
    static int hook_##ID##_##o(request_rec *r, int lookup_uri)                                               \
    {                                                                                                        \
        /* a lookup only asks whether we would answer: we do not say */                                      \
        return lookup_uri ? DECLINED : run_request_phase(r, MM_PHASE_##ID, MM_ORDER_##ORDER);                \
    }
#define MM_HOOK_HANDLER(ID, o, ORDER)                                                                        \
    static int hook_##ID##_##o(request_rec *r)                                                               \
    {                                                                                                        \
        return run_handler(r, MM_PHASE_##ID, MM_ORDER_##ORDER);                                              \
    }
#define MM_HOOK_POSTCONFIG(ID, o, ORDER)                                                                     \
    static int hook_##ID##_##o(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp, server_rec *s)        \
    {                                                                                                        \
        return run_post_config(ptemp, s, MM_PHASE_##ID, MM_ORDER_##ORDER);                                   \
    }
#define MM_HOOK_CHILDINIT(ID, o, ORDER)                                                                      \
    static void hook_##ID##_##o(apr_pool_t *pchild, server_rec *s)                                           \
    {                                                                                                        \
        run_child_init(pchild, s, MM_PHASE_##ID, MM_ORDER_##ORDER);                                          \
    }

#define MM_HOOK_CHILDEXIT(ID, o, ORDER)                                                                      \
    static void hook_##ID##_##o(apr_pool_t *pchild, server_rec *s)                                           \
    {                                                                                                        \
        arm_child_exit(pchild, s, MM_PHASE_##ID, MM_ORDER_##ORDER);                                          \
    }

#define MM_HOOK_TIMERS(ID, o, ORDER)                                                                         \
    static void hook_##ID##_##o(apr_pool_t *pchild, server_rec *s)                                           \
    {                                                                                                        \
        start_timers(pchild, s, MM_PHASE_##ID, MM_ORDER_##ORDER);                                            \
    }

#define MM_DEFINE_HOOKS(ID, STEM, SHAPE, HOOK, WHERE, DEFAULT, ONERROR) MM_ORDERS(MM_HOOK_##SHAPE, ID)
MM_PHASES(MM_DEFINE_HOOKS)
#undef MM_DEFINE_HOOKS

/* ------------------------------------------------------- registration */

/* register_<ID>(order) registers the phase's hook of that order. */
#define MM_REGISTER(ID, STEM, SHAPE, HOOK, WHERE, DEFAULT, ONERROR)                                          \
    static void register_##ID(mm_order_e order)                                                              \
    {                                                                                                        \
        switch (order) {                                                                                     \
        case MM_ORDER_FIRST:                                                                                 \
            ap_hook_##HOOK(hook_##ID##_first, NULL, NULL, APR_HOOK_FIRST);                                   \
            break;                                                                                           \
        case MM_ORDER_MIDDLE:                                                                                \
            ap_hook_##HOOK(hook_##ID##_middle, NULL, NULL, APR_HOOK_MIDDLE);                                 \
            break;                                                                                           \
        default:                                                                                             \
            ap_hook_##HOOK(hook_##ID##_last, NULL, NULL, APR_HOOK_LAST);                                     \
            break;                                                                                           \
        }                                                                                                    \
    }
MM_PHASES(MM_REGISTER)
#undef MM_REGISTER

static void (*const registrars[MM_PHASE_COUNT])(mm_order_e) = {
#define MM_REGISTRAR(ID, STEM, SHAPE, HOOK, WHERE, DEFAULT, ONERROR) register_##ID,
    MM_PHASES(MM_REGISTRAR)
#undef MM_REGISTRAR
};

/* hooked[phase] bit n: the hook of order n is registered in this
 * generation. httpd drops every hook when it rereads its configuration,
 * calls register_hooks again, then our pre_config, then the directives. */
static unsigned char hooked[MM_PHASE_COUNT];

/* The handler's Middle hook is always there: it runs .mrb files (AddHandler
 * mruby-script is not our directive) and reports a SetHandler
 * mruby-native-script section without a script. */
void mm_phase_register_hooks(apr_pool_t *p)
{
    register_HANDLER(MM_ORDER_MIDDLE);
}

void mm_phase_pre_config(void)
{
    handler_scripted = 0;
    memset(hooked, 0, sizeof hooked);
    hooked[MM_PHASE_HANDLER] = 1u << MM_ORDER_MIDDLE;
}

void mm_phase_use(mm_phase_e phase, mm_order_e order)
{
    handler_scripted |= phase == MM_PHASE_HANDLER;
    if (!(hooked[phase] & (1u << order))) {
        hooked[phase] |= 1u << order;
        registrars[phase](order);
    }
}

int mm_phase_in_use(mm_phase_e phase)
{
    return hooked[phase] != 0;
}
